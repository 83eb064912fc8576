"""What mtcio knows of Gfarm and its FUSE mount, in one place: gfwhere's output and host names, the read-ahead.

The ingest (replica hosts of traced files), the envelope harness (where a benchmark's files landed) and the
predictor (bytes a read fetches) all read these from here.
"""
from __future__ import annotations

# What one read after open fetches at least on a FUSE mount: Linux's default read-ahead window (128 KiB,
# VM_READAHEAD_PAGES); gfarm2fs does not change it.
READAHEAD = 128 * 1024


def parse_gfwhere(out: str, paths) -> dict[str, list[str]]:
    """{path: sorted distinct replica hosts} from gfwhere's stdout for `paths`.  With one path gfwhere prints
    the hosts only; with several, a `path:` line (at the line's start) then its hosts, a blank line between."""
    paths = list(paths)
    if len(paths) == 1:
        hosts = [t for line in out.splitlines() if not line.rstrip().endswith(":") for t in line.split()]
        return {paths[0]: sorted(set(hosts))} if hosts else {}
    res: dict[str, list[str]] = {}
    wanted = set(paths)
    cur = None
    for line in out.splitlines():
        s = line.strip()
        if not s:
            continue
        if not line[:1].isspace() and s.endswith(":") and s[:-1] in wanted:
            cur = s[:-1]
            res[cur] = []
        elif cur is not None:
            res[cur].extend(s.split())
    return {k: sorted(set(v)) for k, v in res.items()}


def short_host(host: str) -> str:
    """A host name without its domain (gfwhere may print either form)."""
    return host.split(".", 1)[0]


def host_match(host: str, replicas) -> bool:
    """Whether `host` holds one of `replicas`, by full or short name."""
    if host in replicas:
        return True
    short = short_host(host)
    return any(short_host(r) == short for r in replicas)
