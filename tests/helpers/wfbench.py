"""The checks a traced WfBench run must pass, whatever launched it (Rake, Pwrake)."""
import os
import sqlite3

TASK_ROWS = ("SELECT t.name, t.stage, t.exit_status, t.bytes_read, t.bytes_written, h.name FROM tasks t "
             "JOIN runs r ON r.id = t.run_id JOIN hosts h ON h.id = t.host_id WHERE r.name = ?")


def check_run_matches_instance(db, run, spec, inst, hosts):
    """Every task of the instance in RUN exactly once, with its stage, exit 0, on one of HOSTS, the bytes it read and
    wrote equal to the instance's file sizes; returns the rows (name, stage, exit, read, written, host)."""
    con = sqlite3.connect(db)
    rows = con.execute(TASK_ROWS, (run,)).fetchall()
    con.close()
    expected = {(next(iter(t["outputs"])) if t["outputs"] else t["id"]): t for t in spec["tasks"]}
    assert sorted(r[0] for r in rows) == sorted(expected)          # every task once, nothing else
    sizes = {os.path.basename(k): v for t in spec["tasks"] for k, v in t["outputs"].items()}
    sizes.update({f: inst.sizes[f] for f in inst.inputs()})
    for name, stage, status, read, written, host in rows:
        t = expected[name]
        assert stage == t["stage"] and status == 0 and host in hosts, (name, stage, status, host)
        assert read == sum(sizes[os.path.basename(f)] for f in t["inputs"]), name
        assert written == sum(t["outputs"].values()), name
    assert sum(r[3] for r in rows) == sum(inst.sizes[f] for t in inst.tasks for f in t.inputs)
    return rows
