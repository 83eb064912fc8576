"""I/O concurrency: the envelope is looked up at k, the tasks doing I/O at once, not at the S slots.

When I/O is a small part of each task's run, a round's tasks seldom do I/O at the same moment. Each task's I/O is
spread over its window (first open to last close) with density d = I/O time / window; `mtcprof model` writes

    k = Σ I/O time / ∫ P(any task in I/O) dt,   P = 1 − Π(1 − d_i)

as `io_concurrency` (db/overlap.py), and the envelope is read at max(1, min(k, S)). Without it k = S and the notes
say so. `--validate` shows the run's own k beside the prediction but never feeds it in.
"""
SWITCHES = ("io_overlap",)
STAGE_FIELDS = ("io_concurrency",)
ENVELOPE_METRICS = ()


def concurrency(stage, S: int, on, io_concurrency, notes) -> float:
    """k: the trace's I/O concurrency held to 1..S (io_concurrency given: that one), else S."""
    if "io_overlap" not in on:
        return float(S)
    kio = io_concurrency if io_concurrency is not None else stage.io_concurrency
    if kio is None:
        notes.append(f"I/O concurrency unknown (no trace overlap in the model): taken as its {S} slot"
                     + ("s" if S != 1 else ""))
        return float(S)
    k = max(1.0, min(float(kio), float(S)))
    notes.append(f"I/O concurrency {k:.3g} from the trace's overlap of I/O intervals ({S} slots)")
    return k
