# frozen_string_literal: true
# Pwrake: every command a task sends to a worker runs under the mtcprof shim as that task.  Pwrake's workers
# are long-lived and start each command as a fresh `/bin/sh -c` from one line of text, so the task's identity
# travels in that line: the hook rewrites the line Pwrake::Shell sends (Pwrake itself is not patched; its own
# profile, command.csv, keeps the command as written).  The rule/stage logic is the Rake plugin's.
#   pwrake -r "$(mtcprof plugin-path compat)" -r "$(mtcprof plugin-path pwrake)" -j 8
require "rake"
require_relative "trace"

module MtcIO
  module PwrakeShellHook
    private

    # Pwrake::Shell#_execute(cmd) sends the task's command with _puts; the cd/open/exit lines it sends
    # through _puts elsewhere are left alone.
    def _execute(cmd, *rest, &block)
      @mtcio_pending = Trace.enabled? && @task_name
      super
    ensure
      @mtcio_pending = false
    end

    def _puts(line)
      if @mtcio_pending
        @mtcio_pending = false
        task = Rake.application[@task_name]
        @mtcio_run = TaskRun.new(task) unless @mtcio_run && @mtcio_run.task.equal?(task)
        # mounts: nil -- in Gfarm mode each worker mounts its own gfarm2fs, unknown here; the shim lists them
        line = Trace.wrap(line, task.name, @mtcio_run.stage(line), mounts: nil)
      end
      super(line)
    end
  end

  # Pwrake's profile folder (-L / LOG_DIR), for the import after the ingest.
  def self.pwrake_log_dir
    opts = Rake.application.respond_to?(:pwrake_options) && Rake.application.pwrake_options
    d = opts && opts["LOG_DIR"]
    d.is_a?(String) && File.directory?(d) ? File.expand_path(d) : nil
  rescue StandardError
    nil
  end
end

if defined?(Pwrake::Shell) || (begin; require "pwrake/branch/shell"; true; rescue LoadError; false; end)
  Pwrake::Shell.prepend(MtcIO::PwrakeShellHook)
  Rake::Task.include(MtcIO::TaskStage)
  Rake::TaskManager.prepend(MtcIO::RuleHook)
  # Decide now (one warning when off) and register the end-of-run ingest and profile import.
  if MtcIO::Trace.enabled?
    MtcIO::Trace.after_ingest << lambda do
      d = MtcIO.pwrake_log_dir
      next unless d
      # this runs before Pwrake's own at_exit closes command.csv: flush what it holds
      io = Pwrake::Shell.profiler.instance_variable_get(:@io) if Pwrake::Shell.respond_to?(:profiler)
      io.flush if io.respond_to?(:flush)
      argv = MtcIO::Trace.mtcprof_cmd + ["pwrake-import", d, "--db", MtcIO::Trace.db_path, "--run", MtcIO::Trace.run]
      system(*argv) or $stderr.puts("mtcprof: warning: Pwrake profile #{d} not imported (#{Shellwords.join(argv)})")
    end
  end
else
  MtcIO::Trace.warn_once("Pwrake is not loaded (run this file with `pwrake -r`); for plain Rake load mtcio/rake")
end
