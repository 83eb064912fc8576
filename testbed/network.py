"""The testbed's network: a bridge, one network namespace per host joined to it by a veth pair,
optional tc shaping of each host's link, tagged /etc/hosts lines and one UTS namespace per host."""
import re

from . import layout
from .sh import BedError, run


def _batch(lines, ns=None):
    if lines:
        run(["ip", *(["-n", ns] if ns else []), "-batch", "-"], input="\n".join(lines) + "\n")


def create(nodes):
    """Bridge with the metadata server's address, then one namespace per host with eth0 on the bridge."""
    root = [f"link add {layout.BRIDGE} type bridge",
            f"addr add {layout.META_ADDR}/{layout.PREFIXLEN} dev {layout.BRIDGE}",
            f"link set {layout.BRIDGE} up"]
    for k in range(1, nodes + 1):
        name, veth = layout.node_name(k), layout.veth_name(k)
        root += [f"netns add {name}",
                 f"link add {veth} type veth peer name eth0 netns {name}",
                 f"link set {veth} master {layout.BRIDGE} up"]
    _batch(root)
    for k in range(1, nodes + 1):
        _batch([f"addr add {layout.node_addr(k)}/{layout.PREFIXLEN} dev eth0",
                "link set eth0 up", "link set lo up"], ns=layout.node_name(k))


def netem_available() -> bool:
    """netem is a kernel module some kernels lack; try it on a throw-away veth."""
    probe = "mtcprobe0"
    run(["ip", "link", "del", probe], check=False)
    run(["ip", "link", "add", probe, "type", "veth", "peer", "name", "mtcprobe1"])
    try:
        return run(["tc", "qdisc", "add", "dev", probe, "root", "netem", "delay", "1ms"], check=False).returncode == 0
    finally:
        run(["ip", "link", "del", probe], check=False)


_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)$", re.I)
_DELAY = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
# bits per unit, as tc reads them ('bps' is bytes per second in tc)
_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
         "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}


def parse_rate(text: str) -> float:
    """tc rate ('100mbit', '1gbit', '50mbps') -> bytes per second."""
    m = _RATE.match(text or "")
    if not m:
        raise BedError(f"bad link rate {text!r}: use a number with bit, kbit, mbit, gbit or kbps, mbps, gbps (e.g. 1gbit)")
    return float(m.group(1)) * _BITS[m.group(2).lower()] / 8


def check_delay(text: str):
    if not _DELAY.match(text or ""):
        raise BedError(f"bad link delay {text!r}: use a number with us, ms or s (e.g. 0.2ms)")


def shape(nodes, rate=None, delay=None):
    """Shape both directions of every host's link: egress of the bridge-side veth (traffic to the host)
    and egress of eth0 inside the host (traffic from it). Local traffic inside a host uses lo and is not shaped."""
    if not rate and not delay:
        return
    for k in range(1, nodes + 1):
        for ns, dev in ((None, layout.veth_name(k)), (layout.node_name(k), "eth0")):
            pre = ["tc", *(["-n", ns] if ns else [])]
            if delay:
                netem = ["netem", "delay", delay] + (["rate", rate] if rate else [])
                run(pre + ["qdisc", "add", "dev", dev, "root", *netem])
            else:
                # tbf needs a bucket of at least one MTU; 10 ms worth of the rate keeps throughput near the rate
                burst = max(int(parse_rate(rate) / 100), 32 * 1024)
                run(pre + ["qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                           "burst", str(burst), "latency", "50ms"])


def add_hosts_lines(entries):
    """entries: [(addr, name)]; each line is tagged so teardown removes exactly ours."""
    text = layout.HOSTS_FILE.read_text()
    if text and not text.endswith("\n"):
        text += "\n"
    text += "".join(f"{addr}\t{name}\t{layout.HOSTS_TAG}\n" for addr, name in entries)
    _write_hosts(text)


def remove_hosts_lines() -> int:
    lines = layout.HOSTS_FILE.read_text().splitlines(keepends=True)
    keep = [ln for ln in lines if not ln.rstrip().endswith(layout.HOSTS_TAG)]
    if len(keep) != len(lines):
        _write_hosts("".join(keep))
    return len(lines) - len(keep)


def _write_hosts(text):
    # /etc/hosts may be a bind mount (containers): rewrite in place rather than rename over it
    with open(layout.HOSTS_FILE, "r+") as f:
        f.seek(0)
        f.write(text)
        f.truncate()


def create_uts(name):
    """A persistent UTS namespace whose hostname is the host's name, for everything run 'on' that host."""
    layout.UTS_DIR.mkdir(parents=True, exist_ok=True)
    path = layout.uts_path(name)
    path.touch()
    run(["unshare", f"--uts={path}", "hostname", name])


def our_namespaces():
    out = run(["ip", "netns", "list"], check=False).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(layout.NODE_PREFIX)]


def namespace_pids(ns):
    out = run(["ip", "netns", "pids", ns], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def our_links():
    out = run(["ip", "-o", "link", "show"], check=False).stdout
    names = [ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines() if ln.count(":") >= 2]
    return [n for n in names if n == layout.BRIDGE or re.fullmatch(rf"{layout.VETH_PREFIX}\d+|mtcprobe\d", n)]


def remove_uts():
    if not layout.UTS_DIR.exists():
        return
    for path in layout.UTS_DIR.iterdir():
        run(["umount", str(path)], check=False)
        path.unlink(missing_ok=True)


def teardown():
    """Delete namespaces (their veth ends go with them), then remaining veths, then the bridge."""
    for ns in our_namespaces():
        run(["ip", "netns", "del", ns], check=False)
    links = our_links()
    for link in sorted(links, key=lambda n: n == layout.BRIDGE):
        run(["ip", "link", "del", link], check=False)
    remove_uts()
    remove_hosts_lines()
