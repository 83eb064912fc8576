"""state.json: what an `up` created, written as it goes so `down` can undo a half-built testbed."""
import json
import os

from . import layout


def load():
    try:
        return json.loads(layout.STATE_FILE.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        return {"phase": "corrupt"}


def save(state):
    layout.STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = layout.STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.chmod(tmp, 0o644)
    tmp.replace(layout.STATE_FILE)


def clear():
    layout.STATE_FILE.unlink(missing_ok=True)
