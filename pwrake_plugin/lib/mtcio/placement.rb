# frozen_string_literal: true
# Optional placement for plain Rake (Pwrake's idea, as a fallback where Pwrake is not installed): each task
# runs on one host through a launcher, on the host holding most of its input bytes (gfwhere) among hosts
# with a free slot, else on the least busy one.
#   MTCPROF_HOSTS="mtc-node1:3 mtc-node2:3"      hosts and slots (default 1 slot each)
#   MTCPROF_LAUNCHER="mtcbed exec {host} --"    argv prefix; ssh-like launchers ("ssh {host}") get the
#                                               command as one quoted command line
#   MTCPROF_GFARM_CMD="mtcbed exec mtc-node1 --"  prefix that runs Gfarm's client commands (gfwhere, gfls)
#                                               (default: the launcher on the first host)
#   MTCPROF_MOUNT="/mnt/mtcbed/{host}"          where a host sees the gfarm2fs mount that holds the Rakefile's
#                                               folder: commands start there, so outputs are written on the host
require "shellwords"

module MtcIO
  module Placement
    module_function

    def on?
      return @on unless @on.nil?
      @on = !ENV["MTCPROF_HOSTS"].to_s.strip.empty? && setup
    end

    def setup
      if ENV["MTCPROF_LAUNCHER"].to_s.strip.empty?
        Trace.warn_once("MTCPROF_HOSTS is set but MTCPROF_LAUNCHER is not; tasks run on this host")
        return false
      end
      @slots = {}
      ENV["MTCPROF_HOSTS"].split(/[\s,]+/).reject(&:empty?).each do |w|
        h, n = w.split(":", 2)
        @slots[h] = [(n || 1).to_i, 1].max
      end
      @busy = Hash.new(0)
      @lock = Mutex.new
      @free = ConditionVariable.new
      @facts = {}                 # Gfarm path -> [size, replica hosts], asked once per run
      @pending = {}               # paths wanted, to be asked in the next call
      @asking = {}                # paths of the call in flight
      @asked = ConditionVariable.new
      @launcher = Shellwords.split(ENV["MTCPROF_LAUNCHER"])
      @quoted = %w[ssh rsh].include?(File.basename(@launcher[0]))
      true
    end

    def hosts
      @slots.keys
    end

    # argv running `line` (a shell command line) on `host` through the launcher.
    def launch(host, argv)
      pre = @launcher.map { |w| w.gsub("{host}", host) }
      @quoted ? pre + [Shellwords.join(argv)] : pre + argv
    end

    # A name looked up (never created) on the task's gfarm2fs mount after its command: see argv.
    CLOSED_PROBE = ".mtcio-outputs-closed"

    # argv for one traced command of a task; the task's host is chosen at its first command.
    # gfarm2fs closes a file on Gfarm (its size and replica given to gfmd) in FUSE's release, which the
    # kernel sends without waiting after the writer's close: a task placed on another host at once saw the
    # output at size 0 (testbed, a 2 MB file read on a second host right after its close: 30 and 52 of 150
    # reads short). A lookup on the same mount waits for the releases in progress (gfarm2fs's getattr takes
    # the open-file table lock its release holds), so the task is done only once its outputs are closed.
    def argv(run, traced)
      run.host ||= acquire(run.task)
      dir = workdir(run.host)
      line = if split_mount(Dir.pwd)[0]
               probe = Trace.sq(File.join(dir, CLOSED_PROBE))
               "cd #{Trace.sq(dir)} || exit; (#{traced}); rc=$?; [ -e #{probe} ]; exit $rc"
             else
               "cd #{Trace.sq(dir)} && #{traced}"
             end
      launch(run.host, ["/bin/sh", "-c", line])
    end

    def workdir(host)
      tpl = ENV["MTCPROF_MOUNT"].to_s
      mount, rel = split_mount(Dir.pwd)
      return Dir.pwd if tpl.empty? || mount.nil?
      File.join(tpl.gsub("{host}", host), rel)
    end

    # (gfarm2fs mount, path inside it) of an absolute path; the longest mount wins.
    def split_mount(path)
      m = Trace.gfarm_mounts.select { |mp| path == mp || path.start_with?(mp.end_with?("/") ? mp : mp + "/") }
                .max_by(&:size)
      m ? [m, path[m.size..].sub(%r{\A/}, "")] : [nil, nil]
    end

    # Input bytes per host: the task's prerequisites that are files on Gfarm, their sizes and replica hosts
    # asked from Gfarm (this host's gfarm2fs may still hold the attributes of an output that another host has
    # just written).
    def input_bytes(task)
      paths = task.prerequisites.map { |p| File.expand_path(p) }.uniq.filter_map do |p|
        mount, rel = split_mount(p)
        "/" + rel if mount && File.exist?(p)
      end
      return {} if paths.empty?
      by_host = Hash.new(0)
      facts(paths).each_value { |size, hs| hs.each { |h| by_host[h] += size } }
      by_host
    end

    # {path => [size, hosts]}. Each path is asked of Gfarm once per run (a prerequisite is complete when its
    # task runs, and Rake makes a file once), and the tasks asking at once share one call: a fan-out's tasks
    # become ready together, and a call per task (a process start and two Gfarm clients each) filled the 2-vCPU
    # testbed's CPUs through Montage's fan-outs (36 tiles: 27-30 s a run, 14-16 s asked once per path).
    def facts(paths)
      batch = nil
      @lock.synchronize do
        loop do
          paths.each { |p| @pending[p] = true unless @facts.key?(p) || @asking.key?(p) }
          break if paths.all? { |p| @facts.key?(p) }
          if @asking.empty?
            batch = @pending.keys
            @pending.clear
            batch.each { |p| @asking[p] = true }
            break
          end
          @asked.wait(@lock)
        end
      end
      ask(batch) if batch
      @lock.synchronize { paths.to_h { |p| [p, @facts.fetch(p)] } }
    end

    # One call for `batch`; a path Gfarm did not answer for counts as 0 bytes on no host (placed by load).
    def ask(batch)
      sizes, where = {}, {}
      begin
        sizes, where = gfarm_info(batch)
      ensure
        @lock.synchronize do
          batch.each { |p| @facts[p] = [sizes.fetch(p, 0), where.fetch(p, [])] }
          @asking.clear
          @asked.broadcast
        end
      end
    end

    GFARM_INFO = 'gfwhere -- "$@"; echo @@mtcio@@; gfls -l -- "$@"'

    def gfarm_cmd
      Trace.gfarm_cmd || @launcher.map { |w| w.gsub("{host}", hosts.first) }
    end

    # ({path => size}, {path => [hosts]}) from gfwhere and gfls: one path -> a bare host list, several ->
    # "path:" blocks; gfls -l lines end with the path, the size is the 5th field.
    def gfarm_info(paths)
      argv = ["sh", "-c", GFARM_INFO, "sh", *paths]
      argv = [Shellwords.join(argv)] if @quoted && Trace.gfarm_cmd.nil?
      out = IO.popen(gfarm_cmd + argv, err: File::NULL, &:read)
      where_out, ls_out = out.split("@@mtcio@@\n", 2)
      [parse_gfls(ls_out.to_s, paths), parse_gfwhere(where_out.to_s, paths)]
    rescue SystemCallError => e
      Trace.warn_once("cannot ask Gfarm where the inputs are (#{e.message}); tasks are placed by load only")
      [{}, {}]
    end

    def parse_gfls(out, paths)
      want = paths.to_h { |p| [p, true] }
      out.each_line.filter_map do |l|
        f = l.chomp.split(/\s+/, 9)
        [f[8], f[4].to_i] if f.size == 9 && want[f[8]] && f[4].match?(/\A\d+\z/)
      end.to_h
    end

    def parse_gfwhere(out, paths)
      return { paths[0] => out.split } if paths.size == 1
      res = {}
      cur = nil
      out.each_line do |l|
        s = l.strip
        next if s.empty?
        if l !~ /\A\s/ && s.end_with?(":") && paths.include?(s[0..-2])
          cur = res[s[0..-2]] = []
        elsif cur
          cur.concat(s.split)
        end
      end
      res
    end

    # Short-name match too: gfwhere may print a host's full name.
    def bytes_on(by_host, host)
      by_host.sum { |h, b| h == host || h.split(".")[0] == host.split(".")[0] ? b : 0 }
    end

    # The host for a task: most input bytes among hosts with a free slot, then the least busy; waits for a
    # free slot when every host is full.
    def acquire(task)
      by_host = input_bytes(task)
      @lock.synchronize do
        loop do
          free = hosts.select { |h| @busy[h] < @slots[h] }
          unless free.empty?
            best = free.max_by { |h| [bytes_on(by_host, h), -@busy[h].fdiv(@slots[h]), -hosts.index(h)] }
            @busy[best] += 1
            $stderr.puts "mtcprof: #{task.name} -> #{best} (input bytes #{by_host})" if Trace.verbose?
            return best
          end
          @free.wait(@lock)
        end
      end
    end

    def release(run)
      @lock.synchronize do
        @busy[run.host] -= 1
        @free.signal
      end
    end
  end
end
