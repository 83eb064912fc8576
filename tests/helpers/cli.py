"""The commands as a test calls them: `mtcprof model` in process, `mtcpredict` as a child."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MONTAGE = os.path.join(ROOT, "montage_example", "montage.yaml")


def run_model(argv, capsys):
    import argparse

    from mtcio.db import model
    p = argparse.ArgumentParser()
    model.add_arguments(p)
    rc = model.main(p.parse_args(argv))
    return rc, capsys.readouterr().err


def predict(*args, **kw):
    return subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcpredict; sys.exit(mtcpredict())",
                           *map(str, args)], capture_output=True, text=True, **kw)


def run_envelope(capsys, *argv):
    """(exit code, stdout, stderr) of mtcenvelope ARGV in process, argparse's exits included; never a traceback."""
    from mtcio.envelope import cli as envcli
    try:
        rc = envcli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err
