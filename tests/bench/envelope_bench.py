"""Benchmark: the default envelope sweep (9 metrics x 4 sizes x 4 concurrencies, each point repeated until its 90% interval
is within 5 % or its share of the time budget is spent) on a 4-host testbed. Prints the wall time and the number of
points. Target: <= 5 minutes.

Takes /run/mtcbed.lock like the test fixture (other sessions share the machine's one testbed),
brings a 4-host testbed up, runs `mtcenvelope measure` with its defaults, tears it down.
    python tests/bench/envelope_bench.py [--keep-db PATH] [extra measure args...]
"""
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
MEASURE = [sys.executable, "-m", "mtcio.envelope.cli", "measure"]
TARGET_S = 300


def main(argv):
    keep = None
    if argv[:1] == ["--keep-db"]:
        keep, argv = argv[1], argv[2:]
    if os.geteuid() != 0:
        print("envelope_bench: needs root (the testbed)", file=sys.stderr)
        return 2
    with open("/run/mtcbed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(MTCBED + ["down"], capture_output=True)
        try:
            up = subprocess.run(MTCBED + ["up", "--nodes", "4"], capture_output=True, text=True)
            if up.returncode:
                print(up.stderr, file=sys.stderr)
                return 1
            with tempfile.TemporaryDirectory() as tmp:
                db = keep or os.path.join(tmp, "bench.db")
                t0 = time.monotonic()
                r = subprocess.run(MEASURE + ["--db", db, "--name", "bench", *argv])
                wall = time.monotonic() - t0
                con = sqlite3.connect(db)
                n, bad = con.execute("SELECT COUNT(*), SUM(ok = 0) FROM envelope_points").fetchone()
                metrics = [m for (m,) in con.execute(
                    "SELECT DISTINCT metric FROM envelope_points ORDER BY metric")]
                con.close()
        finally:
            subprocess.run(MTCBED + ["down"], capture_output=True)
    print(json.dumps({"bench": "envelope default sweep, 4 hosts", "wall_s": round(wall, 1),
                      "points": n, "failed": bad or 0, "metrics": metrics,
                      "target_s": TARGET_S, "within_target": wall <= TARGET_S,
                      "exit": r.returncode}))
    return 0 if r.returncode == 0 and wall <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
