"""Names, addresses and paths of the one testbed this machine can hold."""
from pathlib import Path

USER = "mtcbed"                      # unprivileged user that runs every daemon and client
STATE_DIR = Path("/var/lib/mtcbed")  # state.json, Gfarm prefix, per-host spools and logs
HOME = STATE_DIR / "home"            # USER's home: shared key, ssh key
STATE_FILE = STATE_DIR / "state.json"
RUN_DIR = Path("/run/mtcbed")        # persistent UTS namespaces, lock
UTS_DIR = RUN_DIR / "uts"
MOUNT_ROOT = Path("/mnt/mtcbed")     # one gfarm2fs mount per host: MOUNT_ROOT/<host>
LOCK_FILE = Path("/run/mtcbed.lock")

BRIDGE = "mtcbr0"
SUBNET = "10.213.77"                 # private /24 used only between the namespaces and this machine
PREFIXLEN = 24
META_HOST = "mtc-meta"
META_ADDR = f"{SUBNET}.1"
GFMD_PORT = 10601
GFSD_PORT = 10600
PG_PORT = 10602
SSHD_PORT = 22
HOSTS_FILE = Path("/etc/hosts")
HOSTS_TAG = "# mtcbed"
NODE_PREFIX = "mtc-node"
VETH_PREFIX = "mtcv"
MAX_NODES = 64                       # addresses .11-.74; each host costs a gfsd, a gfarm2fs and a namespace


def node_name(k: int) -> str:
    return f"{NODE_PREFIX}{k}"


def node_addr(k: int) -> str:
    return f"{SUBNET}.{10 + k}"


def veth_name(k: int) -> str:
    return f"{VETH_PREFIX}{k}"


def host_dir(name: str) -> Path:
    return STATE_DIR / "hosts" / name


def mount_path(name: str) -> Path:
    return MOUNT_ROOT / name


def uts_path(name: str) -> Path:
    return UTS_DIR / name


GFARM_PREFIX = STATE_DIR / "gfarm"
GFARM_CONFIG = GFARM_PREFIX / "etc" / "gfarm2.conf"
GFMD_CONFIG = GFARM_PREFIX / "etc" / "gfmd.conf"
GFMD_PID = GFARM_PREFIX / "var" / "run" / "gfmd.pid"
LOG_DIR = STATE_DIR / "log"             # daemon logs, owned by USER
GFMD_LOG = LOG_DIR / "gfmd.log"
