# frozen_string_literal: true
# Workaround for Pwrake 2.3.1 on Ruby >= 3.0.2, independent of mtcio's tracing.
#
# Since Ruby 3.0.2 a Mutex/Monitor is owned by a fiber, not by a thread.  Pwrake's task queue
# (Pwrake::TaskQueue, @lock = Monitor.new) is locked from two fibers of one thread: one fiber holds it while
# dequeuing and yields, another enqueues, and Ruby raises
#   ThreadError: deadlock; lock already owned by another fiber
# This file gives that queue per-thread locking again (what Pwrake was written for): re-entrant for every
# fiber of the owning thread, exclusive between threads.  Load it with -r before Pwrake builds its queue:
#   pwrake -r "$(mtcprof plugin-path compat)" ...
# (It cannot come from the Rakefile: Pwrake builds the queue before it reads the Rakefile's tasks.)

module MtcioPwrakeCompat
  # A lock owned by a thread: fibers of the owner pass through; other threads wait.
  class ThreadLock
    def initialize
      @gate = Thread::Queue.new
      @gate << true
      @owner = nil
      @depth = 0
    end

    def synchronize
      if @owner.equal?(Thread.current)
        @depth += 1
        begin
          return yield
        ensure
          @depth -= 1
        end
      end
      @gate.pop               # a queue, not a Mutex: any fiber of the owner may let go
      @owner = Thread.current
      @depth = 1
      begin
        yield
      ensure
        @depth -= 1
        if @depth.zero?
          @owner = nil
          @gate << true
        end
      end
    end

    alias mon_synchronize synchronize
  end

  module PwrakeTaskQueueLock
    def initialize(*args, **kw, &block)
      super
      @lock = MtcioPwrakeCompat::ThreadLock.new
    end
  end
end

begin
  require "pwrake/queue/task_queue"
  Pwrake::TaskQueue.prepend(MtcioPwrakeCompat::PwrakeTaskQueueLock)
rescue LoadError
  warn "mtcprof: warning: pwrake_compat: Pwrake is not on the load path (load this file with `pwrake -r`)"
end
