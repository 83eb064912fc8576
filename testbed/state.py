"""state.json: what an `up` created, written as it goes so `down` can undo a half-built testbed."""
import json
import os

from . import layout


CORRUPT = "corrupt"


def load():
    try:
        st = json.loads(layout.STATE_FILE.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        return {"phase": CORRUPT}
    # valid JSON that is not an object is as unusable as garbage (and would break every st.get)
    return st if isinstance(st, dict) else {"phase": CORRUPT}


def is_corrupt(st) -> bool:
    return bool(st) and st.get("phase") == CORRUPT


def corrupt_message() -> str:
    """What to say about an unreadable state file: `down` works without it (it finds what an `up` made by
    its names), so it is the way out."""
    return (f"the testbed state file {layout.STATE_FILE} is corrupt: run `mtcbed down` to tear down "
            "whatever is left and clear it")


def save(state):
    layout.STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = layout.STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.chmod(tmp, 0o644)
    tmp.replace(layout.STATE_FILE)


def clear():
    layout.STATE_FILE.unlink(missing_ok=True)
