"""The task's data ops as traced: one op per file it reads or writes, of the bytes it really moves.

The paper charges one op of D bytes per task and D = file size × files. A task reading f files of D/f bytes each
makes f ops (`files`):

    f ops of D/f bytes    (f = files_per_task; 1 op of D bytes without it)

and the bytes it really reads count, not its files' sizes (`reread`): a task that reads a file twice moves 2x its
size, and one that reads the header of a large file moves a part of it:

    D = bytes read per task;  D_N = the shared bytes one task reads, over the shared files it really opens

(without it D = file size × files and every task reads all of the shared input, D_N = its summed size).
"""
SWITCHES = ("files", "reread")
STAGE_FIELDS = ("read.bytes_per_task", "read.files_per_task", "read.file_size", "shared.files", "shared.bytes",
                "shared.bytes_read_per_task", "shared.files_per_task", "write.bytes_per_task",
                "write.files_per_task")
ENVELOPE_METRICS = ()


def split(total_bytes, nfiles, on) -> tuple:
    """(ops, bytes per op) of `total_bytes` moved on `nfiles` files."""
    if "files" in on and nfiles > 0:
        return nfiles, total_bytes / nfiles
    return (1.0, total_bytes) if (total_bytes > 0 or nfiles > 0) else (0.0, 0.0)


def read_bytes(stage, on) -> float:
    """D: the bytes a task reads from its 1-to-1 files."""
    r = stage.read
    if "reread" in on or not (r.file_size and r.files_per_task):
        return r.bytes_per_task.mean
    return r.file_size.mean * r.files_per_task


def shared_bytes(stage, on) -> float:
    """D_N: the bytes a task reads from the shared input."""
    sh = stage.shared
    return sh.bytes_read_per_task if "reread" in on else float(sh.bytes)


def shared_files(stage, on, D_N) -> float:
    """Shared files one task reads: the model's count, else its bytes over the shared files' mean size (a stage
    whose tasks each read a few of many shared files is not every task reading all); every one without
    `reread`."""
    sh = stage.shared
    if "reread" not in on:
        return sh.files
    if sh.files_per_task:
        return sh.files_per_task
    mean = sh.bytes / sh.files if sh.files else 0
    return max(1.0, D_N / mean) if mean > 0 else float(sh.files)
