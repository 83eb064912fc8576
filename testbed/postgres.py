"""PostgreSQL as gfmd's metadata backend (Debian's server, run as the testbed user).

config-gfarm 2.7.20 writes `password_encryption = true`, which PostgreSQL 15 rejects. We run a copy
of Debian's config-gfarm whose backend script says scram-sha-256 instead; the copy is made from the
installed package at bring-up, nothing of Gfarm's is kept in this project."""
import glob
import os
import shutil

from . import layout
from .sh import BedError, as_user, run, user_env

CONFIG_COPY = layout.STATE_DIR / "pgconfig"
GFARM_CONFIG_DIR = "/usr/share/gfarm/config"
INIT_SCRIPT = layout.GFARM_PREFIX / "etc" / "init.d" / "gfarm-pgsql"
DATA_DIR = layout.GFARM_PREFIX / "var" / "gfarm-pgsql"


def pg_prefix():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise BedError("PostgreSQL server binaries not found under /usr/lib/postgresql (install postgresql)")
    return os.path.dirname(os.path.dirname(found[-1]))


def patched_config_gfarm():
    """A config-gfarm whose config_dir is a patched copy of Debian's; returns its path."""
    shutil.rmtree(CONFIG_COPY, ignore_errors=True)
    shutil.copytree(GFARM_CONFIG_DIR, CONFIG_COPY / "config")
    backend = CONFIG_COPY / "config" / "config-gfarm.postgresql"
    text = backend.read_text()
    if "password_encryption = true" not in text:
        raise BedError(f"{GFARM_CONFIG_DIR}/config-gfarm.postgresql changed: cannot apply the PostgreSQL 15 fix")
    backend.write_text(text.replace("password_encryption = true", "password_encryption = scram-sha-256"))
    script = CONFIG_COPY / "config-gfarm"
    lines = open(shutil.which("config-gfarm")).read().splitlines(keepends=True)
    lines = [f'config_dir="{CONFIG_COPY / "config"}"\n' if ln.startswith("config_dir=") else ln for ln in lines]
    script.write_text("".join(lines))
    os.chmod(script, 0o755)
    for root, dirs, files in os.walk(CONFIG_COPY):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
    return str(script)


def config_args():
    """(config-gfarm to run, its backend arguments): -N initialises the database without starting it."""
    return patched_config_gfarm(), ["-b", "postgresql", "-P", pg_prefix(), "-p", str(layout.PG_PORT), "-N"]


def start():
    run(as_user([str(INIT_SCRIPT), "start"]), env=user_env(), timeout=60)
    from .gfarm import wait_port
    wait_port(layout.META_ADDR, layout.PG_PORT, "PostgreSQL", DATA_DIR / "log")


def stop():
    if INIT_SCRIPT.exists():
        run(as_user([str(INIT_SCRIPT), "stop"]), env=user_env(), check=False, timeout=30)


def describe():
    return {"port": layout.PG_PORT, "data_dir": str(DATA_DIR), "server": pg_prefix()}
