"""One sshd per host, bound to the host's address inside its namespaces, so a workflow engine reaches
`mtc-nodeK` by ssh as on a cluster. One host key for all hosts; one client key for the testbed user.

sshd runs as root, so nothing of it lives where the testbed user can plant a symlink: keys,
authorized_keys, known_hosts, sshd configs, pid files and logs are root-owned under SSH_DIR, and the
user's ~/.ssh is never touched. The user reads its private key through its group (root:USER 0640) and
finds it through a `Match localuser` block in /etc/ssh/ssh_config.d, which applies to that user alone."""
import os
import shutil
from pathlib import Path

from . import layout
from .sh import BedError, as_user, in_host, run, user_env, user_ids, wait_pid_file

SSH_DIR = layout.STATE_DIR / "ssh"
HOST_KEY = SSH_DIR / "ssh_host_ed25519_key"
CLIENT_KEY = SSH_DIR / "id_ed25519"
AUTHORIZED_KEYS = SSH_DIR / "authorized_keys"
KNOWN_HOSTS = SSH_DIR / "known_hosts"
CLIENT_CONFIG = Path("/etc/ssh/ssh_config.d/mtcbed.conf")


def _fresh_dir():
    shutil.rmtree(SSH_DIR, ignore_errors=True)
    SSH_DIR.mkdir(mode=0o755, parents=True)
    os.chmod(SSH_DIR, 0o755)


def _keys():
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mtcbed-host", "-f", str(HOST_KEY)])
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mtcbed", "-f", str(CLIENT_KEY)])
    # ssh accepts a group-readable key it does not own; the user can read it but not replace it
    os.chown(CLIENT_KEY, 0, user_ids()[1])
    os.chmod(CLIENT_KEY, 0o640)


def _write(path, text, mode=0o644):
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    tmp.replace(path)


def _client_files(hosts):
    _write(AUTHORIZED_KEYS, open(f"{CLIENT_KEY}.pub").read())
    kind, key = open(f"{HOST_KEY}.pub").read().split()[:2]
    patterns = ",".join(f"{h['name']},{h['addr']}" for h in hosts)
    _write(KNOWN_HOSTS, f"{patterns} {kind} {key}\n")
    _write(CLIENT_CONFIG,
           "# written by `mtcbed up --sshd`, removed by `mtcbed down`\n"
           f"Match localuser {layout.USER} host {layout.NODE_PREFIX}*\n"
           f"  IdentityFile {CLIENT_KEY}\n  UserKnownHostsFile {KNOWN_HOSTS}\n"
           "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n")


def _check_client(host):
    """The user's ssh must see our settings (a missing Include in /etc/ssh/ssh_config, or the user's
    own ~/.ssh/config, could hide them); say so instead of letting every ssh fail later."""
    out = run(as_user(["ssh", "-G", host]), env=user_env(), check=False).stdout.lower()
    if f"userknownhostsfile {KNOWN_HOSTS}".lower() not in out.splitlines():
        raise BedError(f"ssh as {layout.USER} does not apply {CLIENT_CONFIG} (does /etc/ssh/ssh_config include "
                       f"{CLIENT_CONFIG.parent}/*.conf, or does {layout.HOME}/.ssh/config override it?)")


def start_all(hosts):
    _fresh_dir()
    _keys()
    CLIENT_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    _client_files(hosts)
    _check_client(hosts[0]["name"])
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    for h in hosts:
        conf, pid, log = (SSH_DIR / f"sshd-{h['name']}.{ext}" for ext in ("conf", "pid", "log"))
        _write(conf,
               f"ListenAddress {h['addr']}:{layout.SSHD_PORT}\n"
               f"HostKey {HOST_KEY}\nPidFile {pid}\nAuthorizedKeysFile {AUTHORIZED_KEYS}\n"
               f"AllowUsers {layout.USER}\nPermitRootLogin no\n"
               "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
               # every session gets the Gfarm config, as `mtcbed exec` does
               f"SetEnv GFARM_CONFIG_FILE={layout.GFARM_CONFIG}\n"
               "PrintMotd no\nStrictModes yes\nSubsystem sftp internal-sftp\n")
        run(in_host(h["name"], ["/usr/sbin/sshd", "-f", str(conf), "-E", str(log)]), umask=0o077)
        # sshd forks into the background before it writes its pid file
        h["sshd_pid"] = wait_pid_file(pid, f"sshd on {h['name']}", log)
        h["sshd_port"] = layout.SSHD_PORT


def remove_client_config():
    CLIENT_CONFIG.unlink(missing_ok=True)
