"""Bring-up and teardown time of mtcbed for 4 and 8 hosts, median of 3 (target: <= 5 s each for 4 hosts)."""
import fcntl
import statistics
import subprocess
import sys
import time

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]


def timed(*args):
    t = time.monotonic()
    subprocess.run(MTCBED + list(args), check=True, capture_output=True)
    return time.monotonic() - t


def main():
    with open("/run/mtcbed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one testbed per machine
        subprocess.run(MTCBED + ["down"], capture_output=True)
        print(f"{'hosts':>5} {'up s (median of 3)':>20} {'down s (median of 3)':>22}")
        for nodes in (4, 8):
            ups, downs = [], []
            for _ in range(3):
                ups.append(timed("up", "--nodes", str(nodes)))
                downs.append(timed("down"))
            print(f"{nodes:>5} {statistics.median(ups):>20.2f} {statistics.median(downs):>22.2f}")


if __name__ == "__main__":
    main()
