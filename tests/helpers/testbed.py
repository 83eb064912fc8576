"""What a testbed leaves on the machine: after `mtcbed down`, nothing."""
import os
import re
import subprocess


def nothing_left():
    """Every trace of a testbed still on this machine (namespaces, links, mounts, processes, files), one line each."""
    left = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"netns {n}" for n in re.findall(r"^(mtc-\S+)", ns, re.M)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    left += [f"link {n}" for n in re.findall(r"^\d+: (mtc[^:@]+)", links, re.M)]
    left += [f"hosts line {ln!r}" for ln in open("/etc/hosts") if "# mtcbed" in ln]
    left += [f"mount {ln.split()[1]}" for ln in open("/proc/self/mounts") if "/mnt/mtcbed" in ln or "/tmp/pwrake_mtcbed_" in ln]
    left += [f"file {p}" for p in ["/etc/ssh/ssh_config.d/mtcbed.conf"] if os.path.exists(p)]
    if os.path.exists("/etc/fuse.conf") and "# added by mtcbed up" in open("/etc/fuse.conf").read():
        left.append("/etc/fuse.conf line")
    uid = int(subprocess.run(["id", "-u", "mtcbed"], capture_output=True, text=True).stdout or -1)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            st = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        if re.search(rf"^Uid:\s+{uid}\b", st, re.M) and not re.search(r"^State:\s+Z", st, re.M):
            left.append(f"process {pid} {open(f'/proc/{pid}/cmdline').read()!r}")
    left += [f"dir {d}" for d in os.listdir("/tmp") if d.startswith(".gfarm-gfsd")]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    left += [f"loop device {ln}" for ln in loops.splitlines() if "/var/lib/mtcbed" in ln]
    if os.path.isdir("/var/lib/mtcbed"):  # the user's home stays; all state goes
        left += [f"state {d}" for d in os.listdir("/var/lib/mtcbed") if d != "home"]
    return left