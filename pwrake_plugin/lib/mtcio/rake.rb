# frozen_string_literal: true
# Plain Rake (`rake -m -j N`): every `sh` of a task runs under the mtcprof shim as that task; with
# MTCPROF_HOSTS and MTCPROF_LAUNCHER set, each task runs on a host chosen by mtcio/placement.rb, and the hosts'
# slots, not -j, bound how many run at once.
# Load it with `rake -I "$(mtcprof plugin-path)" -r mtcio/rake` (or `require "mtcio/rake"` in the Rakefile).
# Under Pwrake, mtcio/pwrake.rb is loaded instead (it hooks Pwrake's shell object).
require "rake"
require_relative "trace"
require_relative "placement"

module MtcIO
  module RakeTaskHook
    # The task's actions run in this thread (rake -m runs tasks on a thread pool): its `sh` calls find it here.
    def execute(args = nil)
      return super unless actions.any? && Trace.enabled?
      prev = Thread.current[:mtcio_task]
      run = Thread.current[:mtcio_task] = TaskRun.new(self)
      begin
        super
      ensure
        Placement.release(run) if run.host
        Thread.current[:mtcio_task] = prev
      end
    end
  end

  module RakeShHook
    # Rake's own `sh`, with the command rewritten; the command shown and in error messages stays the user's.
    def sh(*cmd, &block)
      run = Thread.current[:mtcio_task]
      return super unless run
      options = Hash === cmd.last ? cmd.pop.dup : {}
      set_verbose_option(options)
      Rake.rake_output_message(sh_show_command(cmd)) if options.delete(:verbose)
      options[:verbose] = false
      line = Trace.command_line(cmd)
      traced = Trace.wrap(line, run.task.name, run.stage(line))
      argv = Placement.on? ? Placement.argv(run, traced) : [traced]
      super(*argv, options, &(block || create_shell_runner(cmd)))
    rescue Exception => e # rubocop:disable Lint/RescueException -- re-raised as is, minus this file's frame
      e.set_backtrace(e.backtrace.reject { |l| l.start_with?(__FILE__) }) if e.backtrace
      raise
    end
  end
end

module MtcIO
  module RakeThreadPoolHook
    # With placement the hosts' slots bound the tasks running at once. Rake's -j pool also holds the threads of
    # tasks waiting for their prerequisites: in a deep graph (Montage's is ten levels) a pool the size of the
    # slots has no thread left for the ready tasks, which then run one after another. So with placement the
    # pool may have a thread per task (started only as tasks are queued) and the slots alone bound the work.
    def thread_pool
      return super unless Placement.on?
      @thread_pool ||= Rake::ThreadPool.new([options.thread_pool_size || 0, Rake::Task.tasks.size].max)
    end
  end
end

Rake::Application.prepend(MtcIO::RakeThreadPoolHook)
Rake::Task.include(MtcIO::TaskStage)
Rake::Task.prepend(MtcIO::RakeTaskHook)
Rake::TaskManager.prepend(MtcIO::RuleHook)
FileUtils.prepend(MtcIO::RakeShHook)
