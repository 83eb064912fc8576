"""mtcbed: a real multi-host Gfarm on one machine, one network namespace per host.

Exit codes (mtcio.exitcodes, shared by every mtcio command): 0 success; 1 the operation failed (what was
half-built is torn down); 2 bad arguments; 3 a testbed is already up (up) or none is up, or its state file is
corrupt (exec, status); 4 unknown host (exec); 130 interrupted.  `mtcbed exec` otherwise exits with the
command's own exit code.

`mtcbed exec` is on the path of every task a workflow runs on the testbed: it imports only the state file's
reader and the command prefixes, not the modules that bring a testbed up.
"""
import argparse
import os
import sys

from mtcio.exitcodes import BAD_INPUT, FAILED, INTERRUPTED, STATE, UNKNOWN_HOST, exit_table, printable
from mtcio.helptext import HelpFormatter, add_version

from . import layout

EPILOG = """\
examples:
  mtcbed up --nodes 4                      4 hosts mtc-node1..4, gfarm2fs on /mnt/mtcbed/mtc-nodeK
  mtcbed up --nodes 4 --link-rate 1gbit    shape every host's link (tc tbf)
  mtcbed exec mtc-node2 -- gfwhere /f      run as the testbed user on mtc-node2
  mtcbed status --json
  mtcbed down
"""
_ROOT = "failed: not run as root, or a daemon, namespace or mount could not be set up (what was half-built is torn down)"
EXIT_CODES = {
    None: exit_table({FAILED: _ROOT, STATE: "wrong state: up: a testbed is already up; status, exec: none is up",
                      UNKNOWN_HOST: "unknown host (exec)"}, codes=(0, 1, 2, 3, 4, 130),
                     first="(exec: the command's own once it runs)"),
    "up": exit_table({FAILED: _ROOT, STATE: "wrong state: a testbed is already up (--reuse: a different one)"}),
    "down": exit_table({FAILED: "failed: not run as root, or a part could not be stopped (run it again)"}),
    "status": exit_table({STATE: "wrong state: no testbed is up, or its state file is corrupt"}),
    "exec": exit_table({FAILED: "failed: not run as root, or the namespace could not be entered",
                        BAD_INPUT: "bad input: bad options, no command",
                        STATE: "wrong state: no testbed is up, or its state file is corrupt",
                        UNKNOWN_HOST: "unknown host: HOST is not one of the testbed's"},
                       codes=(BAD_INPUT, INTERRUPTED),
                       first="once CMD starts, CMD's own (mtcbed exec becomes CMD); before:"),
}


def _parser():
    p = argparse.ArgumentParser(prog="mtcbed", description=__doc__.split("\n\n")[0],
                                epilog=EPILOG + "\n" + EXIT_CODES[None], formatter_class=HelpFormatter)
    add_version(p, "mtcbed")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{up,down,status,exec}")

    def command(name, help_, description):
        return sub.add_parser(name, help=help_, description=description, epilog=EXIT_CODES[name],
                              formatter_class=HelpFormatter)
    u = command("up", "bring a testbed up", "Start gfmd, one namespace + gfsd + gfarm2fs mount per host.")
    u.add_argument("--nodes", type=int, required=True, help=f"number of hosts, 1..{layout.MAX_NODES}")
    u.add_argument("--link-rate", metavar="RATE", help="shape each host's link, tc syntax (e.g. 1gbit, 100mbit)")
    u.add_argument("--link-delay", metavar="DELAY", help="one-way delay per link (e.g. 0.2ms); needs netem")
    u.add_argument("--backend", choices=["none", "postgresql"], default="none",
                   help="gfmd metadata backend (default: none, in memory)")
    u.add_argument("--tcp-nodelay", action="store_true",
                   help="`sockopt tcp_nodelay` in gfarm2.conf (Gfarm's default leaves Nagle on: on this testbed reads "
                        "of 16-64 KiB files and small-call writes then stall ~44 ms each)")
    u.add_argument("--sshd", action="store_true", help="run sshd on every host (port 22 on its address)")
    u.add_argument("--reuse", action="store_true", help="succeed if an identical healthy testbed is already up")
    command("down", "tear the testbed down (idempotent; cleans up after a crash too)",
            "Unmount every gfarm2fs, stop gfsd and gfmd, delete the namespaces, veths and bridge; a testbed "
            "that is not up, or half up after a crash, is cleaned up too.")
    s = command("status", "describe the running testbed",
                "Print the running testbed's hosts, addresses, daemons' pids, mounts and problems found.")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    e = command("exec", "run a command as the testbed user on a host",
                "Run CMD as the testbed user in HOST's network and UTS namespaces, "
                "with GFARM_CONFIG_FILE set and the current directory kept.")
    e.usage = "mtcbed exec [-h] HOST -- CMD..."
    e.add_argument("host", metavar="HOST", help="host name, mtc-nodeK (see mtcbed status)")
    e.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD...",
                   help="the command to run, with its arguments, after --")
    return p


def _exec(host, command):
    from . import state
    from .sh import as_user, in_host, user_env
    st = state.load()
    if st is None:
        print("mtcbed: no testbed is up", file=sys.stderr)
        return STATE
    if state.is_corrupt(st):        # its host list is lost: "unknown host" would mislead
        print(f"mtcbed: {state.corrupt_message()}", file=sys.stderr)
        return STATE
    names = [h["name"] for h in st.get("hosts", [])]
    if host not in names:
        print(f"mtcbed: unknown host {printable(host)!r}: hosts are {', '.join(names)}", file=sys.stderr)
        return UNKNOWN_HOST
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("mtcbed exec: no command given (usage: mtcbed exec HOST -- CMD...)", file=sys.stderr)
        return BAD_INPUT
    argv = in_host(host, as_user(command))
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, user_env())
    except OSError as e:
        print(f"mtcbed exec: cannot start {argv[0]}: {e.strerror}", file=sys.stderr)
        return FAILED


def _print_status(st):
    print(f"backend {st['backend']}  hosts {st['nodes']}  phase {st['phase']}  "
          f"link-rate {st.get('link_rate') or 'unshaped'}  link-delay {st.get('link_delay') or 'none'}"
          f"{'  tcp_nodelay' if st.get('tcp_nodelay') else ''}")
    print(f"gfmd  {st['meta']['host']} {st['meta']['addr']}:{st['meta']['port']}  pid {st['meta'].get('pid')}")
    print(f"GFARM_CONFIG_FILE={st['gfarm_config']}  user {st['user']}")
    for h in st["hosts"]:
        print(f"{h['name']:<12} {h['addr']:<14} gfsd :{h['gfsd_port']} pid {h.get('gfsd_pid')}  "
              f"mount {h['mount']} (gfarm2fs pid {h.get('gfarm2fs_pid')})"
              + (f"  sshd pid {h.get('sshd_pid')}" if h.get("sshd_pid") else ""))
    for prob in st.get("problems", []):
        print(f"problem: {prob}")


def main(argv=None):
    try:
        return _main(argv)
    except KeyboardInterrupt:       # also while still importing or parsing
        print("mtcbed: interrupted", file=sys.stderr)
        return INTERRUPTED


def _main(argv=None):
    args = _parser().parse_args(argv)
    if args.cmd == "exec":
        if os.geteuid() != 0:
            print("mtcbed: mtcbed must run as root (it creates network namespaces and starts daemons)",
                  file=sys.stderr)
            return FAILED
        try:
            return _exec(args.host, args.command)
        except KeyboardInterrupt:
            print("mtcbed: interrupted", file=sys.stderr)
            return INTERRUPTED
        except OSError as e:
            print(f"mtcbed: {printable(e)}", file=sys.stderr)
            return FAILED
    import json

    from . import bed
    from .sh import BedError
    try:
        if args.cmd != "status" and os.geteuid() != 0:
            raise BedError("mtcbed must run as root (it creates network namespaces and starts daemons)")
        if args.cmd == "up":
            st = bed.up(args.nodes, args.link_rate, args.link_delay, args.backend, args.sshd, args.reuse,
                        log=lambda m: print(m, file=sys.stderr), tcp_nodelay=args.tcp_nodelay)
            print(f"testbed up: {st['nodes']} hosts in {st.get('up_seconds', 0):.2f}s; "
                  f"mounts under {layout.MOUNT_ROOT}; GFARM_CONFIG_FILE={st['gfarm_config']}")
        elif args.cmd == "down":
            bed.down()
        elif args.cmd == "status":
            st = bed.status()
            from . import state
            if state.is_corrupt(st):        # nothing to describe: every field is lost
                raise bed.NotUp(state.corrupt_message())
            if args.json:
                print(json.dumps(st, indent=1))
            else:
                _print_status(st)
    except bed.UsageError as e:
        print(f"mtcbed: {e}", file=sys.stderr)
        return BAD_INPUT
    except (bed.AlreadyUp, bed.NotUp) as e:
        print(f"mtcbed: {e}", file=sys.stderr)
        return STATE
    except BrokenPipeError:         # `mtcbed status | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (BedError, OSError) as e:
        print(f"mtcbed: {printable(e)}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        print("mtcbed: interrupted", file=sys.stderr)
        return INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
