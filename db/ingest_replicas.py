"""The replica hosts of a run's Gfarm files, with batched `gfwhere` calls (db/gfarm.py parses what it prints)."""
from __future__ import annotations

import json
import os
import subprocess
import time

from mtcio.db.gfarm import parse_gfwhere
from mtcio.db.store import db_text, readable, text_of

GFWHERE_BATCH = 400     # paths per gfwhere call


def default_gfwhere_cmd() -> list[str] | None:
    if os.environ.get("GFARM_CONFIG_FILE") or os.path.exists(os.path.expanduser("~/.gfarm2rc")) or \
            os.path.exists("/etc/gfarm2.conf"):
        return ["gfwhere"]
    return None


def resolve_replicas(paths: list[str], cmd: list[str], timeout: float = 300.0, warn=None) -> tuple[dict, dict]:
    """Replica hosts of Gfarm paths with batched gfwhere calls -> ({path: [hosts]}, {path: error})."""
    found, errors = {}, {}
    errors.update((p, "not a valid path (NUL byte)") for p in paths if "\0" in p)
    paths = [p for p in paths if "\0" not in p]
    for i in range(0, len(paths), GFWHERE_BATCH):
        batch = paths[i:i + GFWHERE_BATCH]
        try:
            r = subprocess.run(cmd + ["--"] + batch, capture_output=True, text=True, timeout=timeout,
                               errors="surrogateescape")
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"cannot run {' '.join(cmd)}: {e}") from None
        got = parse_gfwhere(r.stdout, batch)
        found.update(got)
        for line in r.stderr.splitlines():
            for p in batch:
                if line.startswith(p + ":"):
                    errors[p] = line[len(p) + 1:].strip()
        if not got and r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
            if not errors:
                raise RuntimeError(f"{' '.join(cmd)} failed: {msg}")
        for p in batch:
            if p not in found and p not in errors:
                errors[p] = "no replica reported"
    return found, errors


def fill_replicas(conn, run_id: int, cmd: list[str] | None, warn) -> int:
    """Resolve replica hosts of the run's not yet resolved Gfarm files (one gfwhere per GFWHERE_BATCH paths)."""
    todo = [text_of(r[0]) for r in conn.execute(
        "SELECT DISTINCT gfarm_path FROM files WHERE run_id = ? AND gfarm_path IS NOT NULL AND resolved_at IS NULL",
        (run_id,))]
    if not todo:
        return 0
    if cmd is None:
        warn(f"{len(todo)} Gfarm files: replica hosts not resolved (no Gfarm configured: set GFARM_CONFIG_FILE "
             f"or pass --gfwhere-cmd); locality unknown")
        return 0
    try:
        found, errors = resolve_replicas(todo, cmd, warn=warn)
    except RuntimeError as e:
        warn(f"replica hosts not resolved ({e}); locality unknown")
        return 0
    now = time.time()
    conn.executemany("UPDATE files SET replica_hosts = ?, resolved_at = ?, resolve_error = ? "
                     "WHERE run_id = ? AND gfarm_path = ?",
                     [(json.dumps(found.get(p, [])), now, db_text(errors.get(p)), run_id, db_text(p)) for p in todo])
    if errors:
        ex = next(iter(errors.items()))
        warn(f"{len(errors)} of {len(todo)} Gfarm files have no replica (deleted since?), e.g. {readable(ex[0])}: "
             f"{readable(ex[1])}")
    return len(found)
