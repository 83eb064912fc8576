"""The hosts' gfsd spools on a journaled ext4 file system of their own (a loop-mounted image).

A storage node's spool sits on a journaled file system. This machine's disk is ext4 without a journal, where a
create skips every inode freed in the last minute or more (ext4's recently_deleted check, made only without a
journal): after a run removed its folder the next creates on the same disk were 14-37x slower (500 creates a
batch: 1,500-3,900/s against 55,000/s), and the testbed's create rate (Tm) fell from 1,212 to 770 ops/s over
five back-to-back 4-second probes, recovering after 40 s idle. The image keeps that history out of the
measurements."""
import os
import shutil

from . import layout
from .sh import BedError, run

IMAGE = layout.STATE_DIR / "spools.img"
MOUNT = layout.STATE_DIR / "hosts"          # every host's folder (gfsd.conf, pid file, spool) lives here
SIZE = 32 << 30                              # sparse: the disk pays only for what the spools hold
INODES = 262144                              # inode tables written at mkfs (64 MiB), not in the background


def _mount_table():
    with open("/proc/self/mounts") as f:
        return [line.split()[:3] for line in f]


def mounted():
    """The device mounted on MOUNT, or None."""
    return next((dev for dev, mnt, _ in _mount_table() if mnt == str(MOUNT)), None)


def create():
    """Make the image, mount it on MOUNT (the loop device detaches itself at unmount) and read it through
    with direct I/O so its pages are cached once, as a disk's. Returns a description for the testbed state."""
    remove()
    MOUNT.mkdir(parents=True, exist_ok=True)
    with open(IMAGE, "wb") as f:
        f.truncate(SIZE)
    run(["mkfs.ext4", "-q", "-F", "-N", str(INODES), "-J", "size=64", "-E",
         "lazy_itable_init=0,lazy_journal_init=0", "-L", "mtcbed-spools", str(IMAGE)], timeout=120)
    run(["mount", "-o", "loop,noatime", str(IMAGE), str(MOUNT)])
    dev = mounted()
    if dev is None:
        raise BedError(f"{IMAGE} did not appear mounted on {MOUNT}")
    dio = run(["losetup", "--direct-io=on", dev], check=False).returncode == 0
    shutil.rmtree(MOUNT / "lost+found", ignore_errors=True)
    return {"fs": "ext4 with a journal, loop-mounted image", "image": str(IMAGE), "device": dev,
            "direct_io": dio}


def remove():
    """Unmount and delete the image; a no-op when there is none."""
    if mounted():
        run(["umount", str(MOUNT)], check=False)
        if mounted():
            run(["umount", "-l", str(MOUNT)])
    try:
        IMAGE.unlink()
    except FileNotFoundError:
        pass
