"""A real single-node Slurm cluster on loopback, for the Slurm scheduler tests.

Debian's ``slurm-wlm`` and ``munge`` (installed with apt-get when missing and we are root):
our own munged (its own socket and key), slurmctld and slurmd on free loopback ports, one
node named after this machine's short hostname with every CPU, one partition ``debug``,
``proctrack/linuxproc`` and ``task/none`` (no cgroups needed), state in a temporary folder.
Clients find it through ``SLURM_CONF``; nothing under /etc is changed. Stopped by pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
BINARIES = (
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
    "/usr/sbin/munged",
    "/usr/bin/sbatch",
)


def ensure_slurm() -> str | None:
    """None when Slurm and munge are usable, else the reason they are not."""
    if all(Path(b).exists() for b in BINARIES):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return (
            "slurm-wlm/munge are not installed and cannot be (not root, or no apt-get)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", *PACKAGES]
    if subprocess.run(cmd, env=env, check=False, capture_output=True).returncode != 0:
        subprocess.run(
            ["apt-get", "update", "-q"], env=env, check=False, capture_output=True
        )
        res = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)
        if res.returncode != 0:
            return (
                f"apt-get install slurm-wlm munge failed: {res.stderr.strip()[-300:]}"
            )
    missing = [b for b in BINARIES if not Path(b).exists()]
    return (
        f"slurm-wlm/munge installed without {', '.join(missing)}" if missing else None
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    dir: Path
    conf: Path
    node: str
    partition: str
    pids: list[int] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def stop(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for pid in self.pids:
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)


def _pid_from(path: Path, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{path} did not appear")


def start(d: Path, *, partition: str = "debug") -> Cluster:
    """Start munged, slurmctld and slurmd under ``d``; wait until the node is idle."""
    d.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", "munge", "log"):
        (d / sub).mkdir(exist_ok=True)
    os.chmod(d / "munge", 0o700)
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    os.chmod(key, 0o600)
    sock = d / "munge" / "munge.socket"
    node = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    ctld_port, d_port = _free_port(), _free_port()
    conf = d / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=almanac-test",
                f"SlurmctldHost={node}(127.0.0.1)",
                f"SlurmctldPort={ctld_port}",
                f"SlurmdPort={d_port}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={sock}",
                f"StateSaveLocation={d / 'state'}",
                f"SlurmdSpoolDir={d / 'spool'}",
                f"SlurmctldPidFile={d / 'slurmctld.pid'}",
                f"SlurmdPidFile={d / 'slurmd.pid'}",
                f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={d / 'log' / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SchedulerType=sched/builtin",
                "MpiDefault=none",
                "ReturnToService=2",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "SlurmctldTimeout=30",
                "SlurmdTimeout=30",
                "InactiveLimit=0",
                "KillWait=5",
                "MinJobAge=300",
                "SlurmctldParameters=enable_configless",
                f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={max(1, mem_mb - 512)} State=UNKNOWN",
                f"PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO",
                "",
            ]
        )
    )
    env = dict(os.environ, SLURM_CONF=str(conf))
    cluster = Cluster(d, conf, node, partition)
    subprocess.run(
        [
            "/usr/sbin/munged",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={d / 'munge' / 'munged.pid'}",
            f"--log-file={d / 'log' / 'munged.log'}",
            f"--seed-file={d / 'munge' / 'seed'}",
            "--force",
        ],
        check=True,
        capture_output=True,
    )
    cluster.pids.append(_pid_from(d / "munge" / "munged.pid"))
    subprocess.run(
        ["/usr/sbin/slurmctld", "-f", str(conf), "-i"],
        env=env,
        check=True,
        capture_output=True,
    )
    cluster.pids.append(_pid_from(d / "slurmctld.pid"))
    subprocess.run(
        ["/usr/sbin/slurmd", "-f", str(conf)], env=env, check=True, capture_output=True
    )
    cluster.pids.append(_pid_from(d / "slurmd.pid"))
    deadline = time.monotonic() + 60
    state = ""
    while time.monotonic() < deadline:
        res = subprocess.run(
            ["sinfo", "-h", "-N", "-n", node, "-o", "%T"],
            check=False,
            env=env,
            capture_output=True,
            text=True,
        )
        state = res.stdout.strip()
        if res.returncode == 0 and state.startswith("idle"):
            return cluster
        time.sleep(0.5)
    cluster.stop()
    raise RuntimeError(
        f"the loopback Slurm node did not become idle (state {state!r}); logs in {d / 'log'}"
    )
