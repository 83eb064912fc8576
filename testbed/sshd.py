"""One sshd per host, bound to the host's address inside its namespaces, so a workflow engine reaches
`mtc-nodeK` by ssh as on a cluster. One host key for all hosts; one client key for the testbed user."""
import os
import shutil

from . import layout
from .sh import in_host, read_pid, run

SSH_DIR = layout.STATE_DIR / "ssh"


def _user_ssh_dir():
    d = layout.HOME / ".ssh"
    d.mkdir(mode=0o700, exist_ok=True)
    shutil.chown(d, layout.USER, layout.USER)
    return d


def _keys(user_dir):
    SSH_DIR.mkdir(parents=True, exist_ok=True)
    hostkey = SSH_DIR / "ssh_host_ed25519_key"
    if not hostkey.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mtcbed-host", "-f", str(hostkey)])
    ident = user_dir / "id_ed25519"
    if not ident.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mtcbed", "-f", str(ident)])
    return hostkey, ident


def _client_files(user_dir, hosts, hostkey, ident):
    (user_dir / "authorized_keys").write_text(open(f"{ident}.pub").read())
    kind, key = open(f"{hostkey}.pub").read().split()[:2]
    patterns = ",".join(f"{h['name']},{h['addr']}" for h in hosts)
    (user_dir / "known_hosts").write_text(f"{patterns} {kind} {key}\n")
    (user_dir / "config").write_text(
        f"Host {layout.NODE_PREFIX}*\n  IdentityFile {ident}\n  StrictHostKeyChecking yes\n"
        "  BatchMode yes\n  LogLevel ERROR\n")
    for f in ("authorized_keys", "known_hosts", "config", "id_ed25519", "id_ed25519.pub"):
        p = user_dir / f
        shutil.chown(p, layout.USER, layout.USER)
        os.chmod(p, 0o600 if f != "id_ed25519.pub" else 0o644)


def start_all(hosts):
    user_dir = _user_ssh_dir()
    hostkey, ident = _keys(user_dir)
    _client_files(user_dir, hosts, hostkey, ident)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    for h in hosts:
        d = layout.host_dir(h["name"])
        conf = d / "sshd_config"
        pid = d / "sshd.pid"
        conf.write_text(
            f"ListenAddress {h['addr']}:{layout.SSHD_PORT}\n"
            f"HostKey {hostkey}\nPidFile {pid}\n"
            f"AllowUsers {layout.USER}\nPermitRootLogin no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            # every session gets the Gfarm config, as `mtcbed exec` does
            f"SetEnv GFARM_CONFIG_FILE={layout.GFARM_CONFIG}\n"
            "PrintMotd no\nStrictModes no\nSubsystem sftp internal-sftp\n")
        run(in_host(h["name"], ["/usr/sbin/sshd", "-f", str(conf), "-E", str(layout.LOG_DIR / f"sshd-{h['name']}.log")]))
        h["sshd_pid"] = read_pid(pid)
        h["sshd_port"] = layout.SSHD_PORT
