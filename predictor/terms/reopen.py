"""Re-opens: a file a task opens o times is o ops, because gfarm2fs drops the page cache at open.

Every open fetches again what it reads, at least the readahead window W (the FUSE mount's, 128 KiB): a file of x
bytes opened o times (`opens_per_file`; only with `files`) is

    x ≤ W:  o ops of x bytes          x > W:  o ops of (x + (o − 1) · W) / o bytes on average

(the larger file is read whole by one open and in its first window by the others: a header, then the data). With
`first_op` the opens count as the process's ops. Evidence (testbed): a 26 KB file read in one open costs ~44 ms,
in two ~88 ms; a 535 KB file 1.4 ms in one open and 2.4 ms, header then data, in two. Splitting a larger file's
bytes evenly over its opens instead under-predicted a stage that opens each 535 KB input 4 times by 38 % and 23 %
on the tcp_nodelay testbed, 14 % and 1 % this way (montage_example/RESULTS.md, the passes of 2026-11-24).
"""
from mtcio.db.gfarm import READAHEAD

SWITCHES = ("reopen",)
STAGE_FIELDS = ("read.opens_per_file", "shared.opens_per_file", "files_per_process")
ENVELOPE_METRICS = ()


def read_field(stage, name) -> dict:
    """read term -> the model's field `name` for it (local and remote 1-to-1 reads share the read section)."""
    r = getattr(stage.read, name)
    return {"read_local": r, "read_remote": r, "read_shared": getattr(stage.shared, name)}


def opens(stage, ops, on) -> dict:
    """read term -> opens of a file by a task (> 1 only; none without `reopen` and `files`)."""
    if not ("reopen" in on and "files" in on):
        return {}
    return {t: v for t, v in read_field(stage, "opens_per_file").items() if t in ops and v and v > 1}


def per_open(x, o) -> float:
    """Mean bytes one open of an x-byte file opened o times moves."""
    return x if x <= READAHEAD else (x + (o - 1) * float(READAHEAD)) / o


def apply(ops, size, reopened) -> None:
    for t, o in reopened.items():
        ops[t], size[t] = ops[t] * o, per_open(size[t], o)
