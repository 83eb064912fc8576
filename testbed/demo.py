"""`make demo`: bring a 4-host testbed up, write a file on each host through its own gfarm2fs mount,
read each from another host, show where every replica landed, and tear the testbed down."""
import hashlib
import json
import os
import subprocess
import sys
import time

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]


def mtcbed(*args, **kw):
    return subprocess.run(MTCBED + list(args), check=True, text=True, **kw)


def main():
    if os.geteuid() != 0:
        sys.exit("make demo: needs root (the testbed creates network namespaces)")
    t = time.monotonic()
    mtcbed("up", "--nodes", "4")
    try:
        st = json.loads(mtcbed("status", "--json", capture_output=True).stdout)
        hosts = [h["name"] for h in st["hosts"]]
        print(f"\n4 hosts up in {time.monotonic() - t:.2f}s; each writes 1 MiB through its own mount:\n")
        print(f"{'file':<22}{'written on':<13}{'replica on':<13}{'read back on':<14}md5 equal")
        for i, host in enumerate(hosts):
            name, data = f"demo-{host}.dat", os.urandom(1 << 20)
            mnt = next(h["mount"] for h in st["hosts"] if h["name"] == host)
            mtcbed("exec", host, "--", "sh", "-c", f"cat > {mnt}/{name}", input=data.decode("latin-1"),
                   encoding="latin-1")
            where = mtcbed("exec", host, "--", "gfwhere", f"/{name}", capture_output=True).stdout.split()
            reader = hosts[(i + 1) % len(hosts)]
            rmnt = next(h["mount"] for h in st["hosts"] if h["name"] == reader)
            md5 = mtcbed("exec", reader, "--", "md5sum", f"{rmnt}/{name}", capture_output=True).stdout.split()[0]
            same = md5 == hashlib.md5(data).hexdigest()
            print(f"/{name:<21}{host:<13}{','.join(where):<13}{reader:<14}{'yes' if same else 'NO'}")
        print()
    finally:
        mtcbed("down")


if __name__ == "__main__":
    main()
