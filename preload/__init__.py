"""The LD_PRELOAD shim (C) and the helpers that locate and launch it."""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def lib_path() -> str:
    """Absolute path of the built shim (preload/build/libmtcprof.so); MTCPROF_LIB overrides."""
    p = os.environ.get("MTCPROF_LIB") or os.path.join(_HERE, "build", "libmtcprof.so")
    if not os.path.exists(p):
        raise FileNotFoundError(f"shim not built: {p} (run `make setup` or `make -C preload`)")
    return p
