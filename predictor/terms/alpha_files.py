"""Locality by files: a stage's 1-to-1 read ops split into local and remote by the share of files read locally.

The paper splits the reads by α, the local share of the bytes. The ops are per file (term `data_ops`), so with
α_f = `alpha_files`, the local share of the task-file pairs (α where it is missing; only with `files`):

    local ops = α_f · f,   remote ops = (1 − α_f) · f

A large local file among small remote ones is one op, not α of them: a gathering stage read one 16 KB table
locally among 112 files of 270 B, 30 % of its files local but 62 % of its bytes. Traced, its local and remote
files cost alike (0.67-1.19 ms per file); held out on pass AG with `first_slots` (since removed) the median went
14.2 -> 12.3 % (montage_example/RESULTS.md); in the ablation its p90 +10.4 points (docs/experiments/ablation.md).
"""
SWITCHES = ("alpha_files",)
STAGE_FIELDS = ("read.alpha", "read.alpha_files")
ENVELOPE_METRICS = ()


def local_share(stage, on, alpha) -> float:
    """The share of the read ops charged as local."""
    a = stage.read.alpha_files
    return a if "alpha_files" in on and a is not None and "files" in on else alpha
