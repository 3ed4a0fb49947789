"""A real OpenSSH server on a loopback port, for the remote-host tests.

Debian's openssh-server (installed with apt-get when missing and we are root), generated
ed25519 host and user keys, key authentication only, sftp through internal-sftp. The
"remote" host is this machine as the current user.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def ensure_sshd() -> str | None:
    """None when sshd is usable, else the reason it is not."""
    if Path(SSHD).exists():
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "openssh-server is not installed and cannot be (not root, or no apt-get)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "openssh-server"]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            return f"apt-get install openssh-server failed: {res.stderr.strip()[-300:]}"
    return None if Path(SSHD).exists() else "openssh-server installed no /usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            "almanac-test",
            "-f",
            str(path),
        ],
        check=True,
        capture_output=True,
    )
    return path


@dataclass
class Sshd:
    dir: Path
    port: int
    user: str
    host_pub: str  # "ssh-ed25519 AAAA..."
    pid: int

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_pub}\n"

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


#: The test process's settings a session on the test sshd gets too (``SetEnv``, OpenSSH 8.7+).
_PASSED_ENV = ("ALMANAC_QUIET",)


def start(d: Path, authorized: list[Path]) -> Sshd:
    d.mkdir(parents=True, exist_ok=True)
    host_key = keygen(d / "host_ed25519")
    (d / "authorized_keys").write_text(
        "".join(p.with_suffix(".pub").read_text() for p in authorized)
    )
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    conf = d / "sshd_config"
    conf.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nAuthorizedKeysFile {d}/authorized_keys\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        f"PidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "Subsystem sftp internal-sftp\nLogLevel VERBOSE\n"
        # a session gets none of the test process's environment: the suite's runs do not wait for
        # a quiet machine nor measure again (tests/conftest.py), over ssh neither (without it a
        # remote run on a busy machine waited up to 120 s a configuration, attempts thrice)
        + "".join(
            f"SetEnv {k}={os.environ[k]}\n" for k in _PASSED_ENV if os.environ.get(k)
        )
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [SSHD, "-f", str(conf), "-E", str(d / "sshd.log")],
        check=True,
        capture_output=True,
    )
    # the daemon forks: wait until it has written its pid and accepts connections
    pidfile, pid = d / "sshd.pid", None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text and pid is None:
            pid = int(text.split()[0])
        if pid is not None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                pass
        time.sleep(0.05)
    else:
        log = (d / "sshd.log").read_text() if (d / "sshd.log").exists() else ""
        raise RuntimeError(f"sshd did not start on port {port}: {log[-1000:]}")
    pub = " ".join(Path(str(host_key) + ".pub").read_text().split()[:2])
    return Sshd(d, port, getpass.getuser(), pub, pid)
