"""Call size: a stage's reads and writes are looked up in the envelope measured with calls nearest their own.

On a FUSE mount small write calls cost more per byte: writing files of 256 KiB-4 MiB in 2,880-byte calls gave
2-4x fewer ops/s than in 1 MiB calls on the testbed (one file per process); reads are merged by readahead. With
several `--envelope`s, a term's ops are looked up in the one whose bytes per call (`block`) is nearest the
stage's traced bytes per call b (system calls: a stdio stream writes its buffer, 8 KiB on gfarm2fs), in log scale:

    envelope = argmin over the envelopes E of |log(b / block_E)|

Without a near one the notes flag writes in calls under 1/SMALL_CALLS of the envelope's.
"""
SWITCHES = ("call_size",)
STAGE_FIELDS = ("read.bytes_per_call", "shared.bytes_per_call", "write.bytes_per_call")
ENVELOPE_METRICS = ("T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL")
ENVELOPES = "those measured with other bytes per call (mtcenvelope measure --block)"
# calls this many times smaller than the envelope's get a note: a judgement when the note came (4d61248), the
# measured slowdown being at 2,880-byte calls against 1 MiB, 364x smaller; not fitted
SMALL_CALLS = 8


def calls(stage) -> dict:
    """term -> the stage's mean bytes per call for it (None: not traced)."""
    r, w = stage.read.bytes_per_call, stage.write.bytes_per_call
    return {"read_local": r, "read_remote": r, "read_shared": stage.shared.bytes_per_call or r, "write": w,
            "meta": None}


def note_small_writes(stage, surface, writes: bool, on, notes) -> None:
    """A note when the stage writes in calls far smaller than those of the envelope its writes are looked up in
    (the main one, without `call_size`)."""
    if "call_size" in on:
        surface = surface.at_calls(calls(stage)["write"], metric="TL")
    b = stage.write.bytes_per_call
    if b and b * SMALL_CALLS < surface.block and writes:
        notes.append(f"writes in {b:,.0f}-byte calls, the envelope's in {surface.block:,}-byte calls: small write "
                     f"calls can cost several times more (measure the envelope with --block {int(b)})")


def per_call(stage, t, on):
    """The bytes per call term t's ops are looked up at (None: the main envelope's calls)."""
    return calls(stage)[t] if "call_size" in on else None


def lookups(env, stage, t, metric, on):
    """Term t's look-ups: in the envelope of the nearest calls, or the main one."""
    return env.at_calls(calls(stage)[t], metric=metric) if "call_size" in on else env
