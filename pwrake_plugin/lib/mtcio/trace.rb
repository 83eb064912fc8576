# frozen_string_literal: true
# mtcio tracing core, shared by the Rake and the Pwrake hooks: configuration from the environment, the
# command rewriting that runs a task's shell command under the mtcprof shim with the task's identity in the
# command text, the stage of a task, and the ingest of the run when the workflow ends.
#
# Environment (all optional):
#   MTCPROF_PLUGIN=off        run the workflow exactly as without the plugin (one warning)
#   MTCPROF_LIB               the shim (default: the one installed next to this plugin)
#   MTCPROF_DIR               log folder, visible to every host (default: ./mtcprof-logs/RUN)
#   MTCPROF_RUN               run name (default: <folder>-<date>-<time>)
#   MTCPROF_DB                SQLite store the run is ingested into (default: ./mtcprof.db)
#   MTCPROF_INGEST=off        do not ingest at the end
#   MTCPROF_CMD               the mtcprof command (default: mtcprof on PATH)
#   MTCPROF_GFARM_CMD         prefix that runs Gfarm's client commands for placement and ingest
#                             (e.g. "mtcbed exec mtc-node1 --"; default: the placement launcher, or none)
#   MTCPROF_VERBOSE=1         say where each task is placed and why
#   MTCPROF_INCLUDE, MTCPROF_EXCLUDE, MTCPROF_TRACE   passed on to the shim
#   MTCPROF_CAPTURE=darshan   run each command under Darshan instead of the shim (for sites that keep Darshan):
#                             MTCPROF_DARSHAN_LIB names the libdarshan.so to preload; each command gets its own
#                             log folder (DARSHAN_LOGPATH) holding mtcprof-task.env (task, stage, run, host:
#                             Darshan records no environment); MTCPROF_TRACE=ops turns DXT on; the run is
#                             ingested with `mtcprof ingest --from darshan`

require "shellwords"

module MtcIO
  OFF_WORDS = %w[0 off no false disable disabled].freeze

  module Trace
    module_function

    # Single-quote a word for /bin/sh: every byte literal, including newlines.
    def sq(s)
      "'" + s.to_s.gsub("'") { "'\\''" } + "'"
    end

    def env_on?(name)
      v = ENV[name]
      v.nil? || !OFF_WORDS.include?(v.strip.downcase)
    end

    def verbose?
      @verbose = !ENV["MTCPROF_VERBOSE"].to_s.empty? && env_on?("MTCPROF_VERBOSE") if @verbose.nil?
      @verbose
    end

    def warn_once(msg)
      @warned ||= {}
      return if @warned[msg]
      @warned[msg] = true
      $stderr.puts "mtcprof: warning: #{msg}"
    end

    def default_lib
      # lib/mtcio/trace.rb -> <package>/pwrake_plugin/lib/mtcio; the shim is <package>/preload/build
      File.expand_path("../../../preload/build/libmtcprof.so", __dir__)
    end

    # Decides once whether tracing is on; prints the one warning when it is not.
    def enabled?
      return @enabled unless @enabled.nil?
      @enabled =
        if !env_on?("MTCPROF_PLUGIN")
          warn_once("plugin disabled by MTCPROF_PLUGIN=#{ENV['MTCPROF_PLUGIN']}; the workflow runs untraced")
          false
        elsif capture.nil?
          warn_once("MTCPROF_CAPTURE=#{ENV['MTCPROF_CAPTURE']} is neither shim nor darshan; the workflow runs untraced")
          false
        elsif darshan? && ENV["MTCPROF_DARSHAN_LIB"].to_s.empty?
          warn_once("MTCPROF_CAPTURE=darshan needs MTCPROF_DARSHAN_LIB (the libdarshan.so to preload); " \
                    "the workflow runs untraced")
          false
        elsif !File.file?(lib)
          warn_once(if darshan?
                      "Darshan library not found: #{lib} (MTCPROF_DARSHAN_LIB); the workflow runs untraced"
                    else
                      "shim not found: #{lib} (set MTCPROF_LIB or run `make -C preload`); the workflow runs untraced"
                    end)
          false
        else
          setup_dir
        end
    end

    # :shim (default) or :darshan (MTCPROF_CAPTURE=darshan); nil for any other word.
    def capture
      v = ENV["MTCPROF_CAPTURE"].to_s.strip.downcase
      v.empty? || v == "shim" || v == "mtcprof" ? :shim : (v == "darshan" ? :darshan : nil)
    end

    def darshan?
      capture == :darshan
    end

    def lib
      @lib ||= File.expand_path(darshan? ? ENV["MTCPROF_DARSHAN_LIB"].to_s :
                                (ENV["MTCPROF_LIB"].to_s.empty? ? default_lib : ENV["MTCPROF_LIB"]))
    end

    def run
      @run ||= ENV["MTCPROF_RUN"].to_s.empty? ? "#{File.basename(Dir.pwd)}-#{Time.now.strftime('%Y%m%d-%H%M%S')}" : ENV["MTCPROF_RUN"]
    end

    def log_dir
      @log_dir ||= File.expand_path(ENV["MTCPROF_DIR"].to_s.empty? ? File.join("mtcprof-logs", run) : ENV["MTCPROF_DIR"])
    end

    def db_path
      @db_path ||= File.expand_path(ENV["MTCPROF_DB"].to_s.empty? ? "mtcprof.db" : ENV["MTCPROF_DB"])
    end

    # Tasks may run as another user (a launcher, ssh): the folder is made writable for all, sticky like /tmp.
    def setup_dir
      unless File.directory?(log_dir)
        require "fileutils"
        ::FileUtils.mkdir_p(log_dir)
        File.chmod(0o1777, log_dir)
      end
      if darshan? && !File.directory?(darshan_dir)
        Dir.mkdir(darshan_dir)
        File.chmod(0o1777, darshan_dir)        # each command makes its own folder in it, as the task's user
      end
      at_exit { MtcIO::Trace.finish }
      true
    rescue SystemCallError => e
      warn_once("cannot create the log folder #{log_dir}: #{e.message}; the workflow runs untraced")
      false
    end

    # gfarm2fs mount points of this machine, for MTCPROF_GFARM_MOUNTS (so that no traced process reads
    # /proc/self/mounts).  Under Pwrake's Gfarm mode the workers mount their own later: callers pass nil then.
    def gfarm_mounts
      @gfarm_mounts ||= begin
        File.readlines("/proc/self/mounts").map(&:split).select { |f| f[2] == "fuse.gfarm2fs" }
            .map { |f| f[1].gsub(/\\([0-7]{3})/) { $1.to_i(8).chr } }
      rescue SystemCallError
        []
      end
    end

    def darshan_dir
      File.join(log_dir, "darshan")
    end

    # One folder per command under darshan_dir: the task's name made safe for a path, a digest of the exact name,
    # and a number counting the run's commands (a task's several `sh` calls, its retries).
    def command_dir(task)
      @seq_lock ||= Mutex.new
      n = @seq_lock.synchronize { @seq = (@seq || 0) + 1 }
      require "digest"
      safe = task.to_s.gsub(/[^A-Za-z0-9._-]/, "_")[0, 48]
      File.join(darshan_dir, "#{safe}-#{Digest::SHA256.hexdigest(task.to_s)[0, 12]}", "c#{n}")
    end

    # `cmd` run under Darshan: Darshan writes each process's log under DARSHAN_LOGPATH/<year>/<month>/<day>/ and
    # makes no folder itself, so today's and tomorrow's (a command running past midnight) are made first; the
    # task's identity goes into mtcprof-task.env beside them (NUL-separated, the host as the task's machine names
    # itself), since a Darshan log keeps no environment.
    def wrap_darshan(cmd, task, stage, mounts)
      d = command_dir(task)
      now = Time.now
      days = [now, now + 86_400].map { |t| sq(File.join(d, t.strftime("%Y/%-m/%-d"))) }.uniq
      fields = [["MTCPROF_TASK", task], ["MTCPROF_STAGE", stage], ["MTCPROF_RUN", run]]
      if mounts && !mounts.empty? && mounts.none? { |m| m.include?(":") }
        fields << ["MTCPROF_GFARM_MOUNTS", mounts.join(":")]
      end
      fmt = fields.map { |k, _| "#{k}=%s\\0" }.join + "MTCPROF_HOST=%s\\0"
      env = +"LD_PRELOAD=#{sq(lib)}${LD_PRELOAD:+:$LD_PRELOAD} DARSHAN_ENABLE_NONMPI=1 DARSHAN_LOGPATH=#{sq(d)}"
      env << " DXT_ENABLE_IO_TRACE=1" if ENV["MTCPROF_TRACE"].to_s.split(/[,\s]+/).include?("ops")
      "mkdir -p #{days.join(' ')} && printf #{sq(fmt)} #{fields.map { |_, v| sq(v) }.join(' ')} \"$(uname -n)\" " \
        "> #{sq(File.join(d, 'mtcprof-task.env'))}; #{env} exec /bin/sh -c #{sq(cmd)}"
    end

    # The shell command that runs `cmd` (a /bin/sh command line) traced as `task` of `stage`.
    def wrap(cmd, task, stage, mounts: gfarm_mounts)
      return wrap_darshan(cmd, task, stage, mounts) if darshan?
      env = +"LD_PRELOAD=#{sq(lib)}${LD_PRELOAD:+:$LD_PRELOAD} MTCPROF_DIR=#{sq(log_dir)} " \
             "MTCPROF_RUN=#{sq(run)} MTCPROF_TASK=#{sq(task)} MTCPROF_STAGE=#{sq(stage)}"
      env << " MTCPROF_GFARM_MOUNTS=#{sq(mounts.join(':'))}" if mounts && mounts.none? { |m| m.include?(":") }
      %w[MTCPROF_INCLUDE MTCPROF_EXCLUDE MTCPROF_TRACE MTCPROF_TRACE_MAX].each do |k|
        env << " #{k}=#{sq(ENV[k])}" if ENV[k] && !ENV[k].empty?
      end
      "#{env} exec /bin/sh -c #{sq(cmd)}"
    end

    # Rake's multi-argument form (`sh "prog", "arg with space"`, optionally an env hash first) as one
    # command line with the same meaning.
    def command_line(cmd)
      return cmd[0].to_s if cmd.size == 1 && !cmd[0].is_a?(Hash)
      words = []
      cmd = cmd.dup
      if cmd.first.is_a?(Hash)
        cmd.shift.each { |k, v| words << (v.nil? ? "unset #{sq(k)};" : "#{k}=#{sq(v)}") }
      end
      cmd.each { |a| words << (a.is_a?(Array) ? sq(a[0]) : sq(a)) }   # [prog, argv0]: run prog
      words.join(" ")
    end

    # The first program's name in a command line: leading VAR=value words, `;`, `(` and `exec`/`env` skipped.
    def first_program(cmd)
      s = cmd.to_s.lstrip
      loop do
        m = s.match(/\A(?:[A-Za-z_][A-Za-z0-9_]*=(?:\\.|'[^']*'|"(?:\\.|[^"\\])*"|[^\s;])*|(?:exec|env|nice|time)(?=\s)|[(;{])\s*/)
        break unless m && !m[0].empty?
        s = m.post_match
      end
      w = s[/\A(?:\\.|'[^']*'|"(?:\\.|[^"\\])*"|[^\s;&|<>()])+/].to_s.gsub(/\\(.)/, '\1').delete("'\"")
      w.empty? ? "sh" : File.basename(w)
    end

    # Stages named by the Rakefile: MtcIO.stage("mProjectPP", /\.proj$/, "other_task").
    def stage_rules
      @stage_rules ||= []
    end

    def named_stage(task_name)
      stage_rules.each do |name, pat|
        return name if pat.is_a?(Regexp) ? pat.match?(task_name) : pat.to_s == task_name
      end
      nil
    end

    # A rule's name: its target pattern as written (`rule ".proj" => ...` -> ".proj").
    def rule_name(pattern)
      src = pattern.is_a?(Regexp) ? pattern.source : pattern.to_s
      plain = src.sub(/\$\z/, "")
      plain.gsub(/\\(.)/, '\1').match?(/[\[\]()*+?{}|^$\\]/) ? src : plain.gsub(/\\(.)/, '\1')
    end

    # Stage of a task: set by the Rakefile, else its rule's name, else the first program of `cmd`.
    def stage_of(task, cmd)
      named_stage(task.name) ||
        (task.respond_to?(:mtcio_stage) && task.mtcio_stage) ||
        (task.respond_to?(:mtcio_rule) && task.mtcio_rule && rule_name(task.mtcio_rule)) ||
        first_program(cmd)
    end

    def mtcprof_cmd
      require "shellwords"
      Shellwords.split(ENV["MTCPROF_CMD"].to_s.empty? ? "mtcprof" : ENV["MTCPROF_CMD"])
    end

    # Prefix that runs a Gfarm client command (gfwhere, gfls), e.g. "mtcbed exec mtc-node1 --"; nil: not set.
    def gfarm_cmd
      v = ENV["MTCPROF_GFARM_CMD"]
      v.nil? || v.strip.empty? ? nil : Shellwords.split(v)
    end

    # gfwhere for ingest: MTCPROF_GFARM_CMD, else the placement's launcher, else ingest's own default.
    def gfwhere_cmd
      pre = gfarm_cmd || (defined?(MtcIO::Placement) && MtcIO::Placement.on? ? MtcIO::Placement.gfarm_cmd : nil)
      pre && pre + ["gfwhere"]
    end

    # Hooks that run after the ingest (the Pwrake profile import).
    def after_ingest
      @after_ingest ||= []
    end

    # At the end of the workflow (success or failure): ingest the run and say where it is.  Never changes
    # the workflow's exit status.
    def finish
      return if @finished
      @finished = true
      return unless env_on?("MTCPROF_INGEST")
      pattern = darshan? ? "*.darshan" : "*.mtclog"
      return $stderr.puts("mtcprof: no task was traced (#{log_dir} holds no log)") if Dir.glob(File.join(log_dir, "**", pattern)).empty?
      require "shellwords"
      argv = mtcprof_cmd + ["ingest", log_dir, "--db", db_path, "--run", run]
      argv += ["--from", "darshan"] if darshan?
      argv += ["--gfwhere-cmd", Shellwords.join(gfwhere_cmd)] if gfwhere_cmd
      ok = begin
        system(*argv)
      rescue SystemCallError => e
        $stderr.puts "mtcprof: warning: cannot run #{argv[0]}: #{e.message}"
        false
      end
      unless ok
        $stderr.puts "mtcprof: warning: ingest failed; the logs stay in #{log_dir} " \
                     "(retry: #{Shellwords.join(argv)})"
        return
      end
      after_ingest.each { |h| h.call }
      $stderr.puts "mtcprof: run #{run} stored in #{db_path}"
      $stderr.puts "mtcprof: report: mtcprof report --db #{Shellwords.escape(db_path)} --run #{Shellwords.escape(run)} -o #{Shellwords.escape("report-#{run}")}"
    end
  end

  # For Rake and Pwrake alike: a task carries a stage the Rakefile set and the rule that made it (its default
  # stage); the rule is recorded where Rake makes a task from a rule.
  module TaskStage
    attr_accessor :mtcio_stage, :mtcio_rule
  end

  module RuleHook
    private

    def attempt_rule(task_name, task_pattern, *rest)
      task = super
      task.mtcio_rule ||= task_pattern if task.respond_to?(:mtcio_rule=)
      task
    end
  end

  # What a running task carries: its stage (decided at its first command) and its placement.
  class TaskRun
    attr_reader :task
    attr_accessor :host

    def initialize(task)
      @task = task
    end

    def stage(cmd)
      @stage ||= Trace.stage_of(@task, cmd)
    end
  end

  # Rakefile API (guard with `if defined?(MtcIO)` so that the Rakefile also runs without the plugin):
  #   MtcIO.stage "mProjectPP", /\.proj\z/, "setup"    tasks matching a pattern or named exactly
  def self.stage(name, *patterns)
    patterns.each { |p| Trace.stage_rules << [name.to_s, p] }
  end
end
