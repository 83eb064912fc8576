# frozen_string_literal: true
# Optional placement for plain Rake (Pwrake's idea, as a fallback where Pwrake is not installed): each task
# runs on one host through a launcher, on the host holding most of its input bytes (gfwhere) among hosts
# with a free slot, else on the least busy one.
#   MTCPROF_HOSTS="mtc-node1:3 mtc-node2:3"      hosts and slots (default 1 slot each)
#   MTCPROF_LAUNCHER="mtcbed exec {host} --"    argv prefix; ssh-like launchers ("ssh {host}") get the
#                                               command as one quoted command line
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

    # argv for one traced command of a task; the task's host is chosen at its first command.
    def argv(run, traced)
      run.host ||= acquire(run.task)
      launch(run.host, ["/bin/sh", "-c", "cd #{Trace.sq(workdir(run.host))} && #{traced}"])
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

    # Input bytes per host: the task's prerequisites that are files on Gfarm, located with one gfwhere call.
    def input_bytes(task)
      sizes = {}
      task.prerequisites.each do |p|
        path = File.expand_path(p)
        next unless File.file?(path)
        mount, rel = split_mount(path)
        sizes["/" + rel] = (sizes["/" + rel] || 0) + File.size(path) if mount
      end
      return {} if sizes.empty?
      by_host = Hash.new(0)
      where(sizes.keys).each { |gpath, hs| hs.each { |h| by_host[h] += sizes[gpath] } }
      by_host
    end

    def gfwhere_argv(paths)
      (Trace.gfwhere_cmd ? Trace.gfwhere_cmd + ["--"] + paths : launch(hosts.first, ["gfwhere", "--"] + paths))
    end

    # gfwhere's answer: one path -> a bare host list; several -> "path:" blocks.
    def where(paths)
      out = IO.popen(gfwhere_argv(paths), err: File::NULL, &:read)
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
    rescue SystemCallError => e
      Trace.warn_once("gfwhere failed (#{e.message}); tasks are placed by load only")
      {}
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
