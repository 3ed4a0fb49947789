"""Run a matrix on Slurm nodes: one exclusive batch job per (node, matrix).

For each chosen node (a partition's nodes, narrowed by a feature constraint, or a nodelist):

1. the project snapshot (runtime.remote.snapshot) is unpacked once per digest in the shared
   work folder (``--workdir``: a path every node sees, as on any cluster), the model registry
   and the matrix copied under ``<workdir>/nodes/<node>/data``: the node's own data folder,
   kept between runs, so a resubmitted matrix resumes where the node stopped;
2. ``sbatch --exclusive --nodelist=<node>`` submits a job running ``runtime.remote.agent run``
   in the project's environment (this Python unless ``--python``): no other job shares the
   node's cores or GPUs while it measures; the host is fingerprinted inside the job as always
   (Slurm's node name becomes the host's *name*, a label, never its id);
3. while jobs are queued or running, ``squeue`` is polled and the job's output file read:
   queued (with Slurm's reason), running, each configuration as it finishes;
4. when a job ends, every artifact it reported is checked like an SSH fetch (a path inside the
   node's data/runs, schema-valid, the host the job fingerprinted, the job's own id in
   ``build.almanac_source.slurm``) and written under data/runs; whatever the job did not finish
   (failed node, time limit, scancel, no artifact) becomes failed artifacts naming the node,
   the job and the reason (runtime.remote.failed).

Bad input refused before anything is submitted: no Slurm or a Slurm that does not answer
(``sinfo`` fails), a partition that does not exist, no node matching.
"""

from __future__ import annotations

import getpass
import io
import json
import shlex
import subprocess
import sys
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from core import artifacts, request_records, untar
from core.errors import ArtifactError, UserError
from core.paths import cache_dir, project_root, runs_dir
from core.records.run import run_path
from runtime.execution import matrix as matrix_mod
from runtime.hosts.inventory import Host
from runtime.models import registry as models
from runtime.remote import snapshot as snapshot_mod
from runtime.remote.agent import PREFIX
from runtime.remote.controller import HostOutcome, ProgressFn, _include_chain
from runtime.remote.failed import done_label, failed_artifacts

TERMINAL = {
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "CANCELLED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}
# a job's end state -> the failed artifact's error kind (core run schema's enum)
ERROR_KIND = {
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "NODE_FAIL": "unreachable",
    "BOOT_FAIL": "unreachable",
}
BAD_NODE_STATES = (
    "down",
    "drain",
    "fail",
    "maint",
    "unknown",
    "not_responding",
    "power",
)
POLL_S = 1.0


@dataclass
class JobOutcome(HostOutcome):
    """A node's outcome, with its Slurm job (id, node, partition, state, exit code, start, end)."""

    job: dict[str, Any] | None = None


class SlurmError(UserError):
    """Slurm is missing, does not answer, or refused what we asked before any job ran."""


@dataclass
class SlurmOptions:
    partition: str = ""
    constraint: str = ""
    nodelist: list[str] = field(default_factory=list)
    time_limit: str = "60"  # sbatch --time: minutes, or [D-]HH:MM:SS
    account: str = ""
    workdir: str = ""  # shared folder every node sees (default: the cache dir)
    python: str = ""  # the project's Python on the nodes (default: this one)


def _slurm(args: list[str], what: str, timeout: float = 30) -> str:
    """Run a Slurm client; its stdout, or SlurmError with one line naming what failed."""
    try:
        res = subprocess.run(
            args, check=False, capture_output=True, text=True, timeout=timeout
        )
    except FileNotFoundError:
        raise SlurmError(
            f"slurm: {args[0]} is not installed (Debian: apt-get install slurm-client)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"slurm: {what}: {args[0]} did not answer within {timeout:g} s"
        ) from None
    if res.returncode != 0:
        err = (
            " ".join((res.stderr or res.stdout).split())[-300:]
            or f"exit {res.returncode}"
        )
        raise SlurmError(f"slurm: {what}: {err}")
    return res.stdout


@dataclass
class Node:
    name: str
    state: str
    features: list[str]
    reason: str = ""


def partitions() -> dict[str, bool]:
    """Partition name -> is the default one (``sinfo`` must answer)."""
    out = _slurm(
        ["sinfo", "-h", "-o", "%P"], "sinfo failed (is slurmctld running? SLURM_CONF?)"
    )
    return {p.rstrip("*"): p.endswith("*") for p in out.split() if p}


def choose_nodes(opts: SlurmOptions) -> tuple[str, list[Node]]:
    """The partition to submit to and the nodes to run on; SlurmError for anything wrong."""
    parts = partitions()
    part = opts.partition or next((p for p, default in parts.items() if default), "")
    if not part:
        raise SlurmError(
            "slurm: no --partition given and the cluster has no default partition"
        )
    if part not in parts:
        raise SlurmError(
            f"slurm: partition {part!r} does not exist (partitions: {', '.join(sorted(parts)) or 'none'})"
        )
    out = _slurm(
        ["sinfo", "-h", "-N", "-p", part, "-o", "%N|%T|%f|%E"],
        f"sinfo -p {part} failed",
    )
    nodes: dict[str, Node] = {}
    for line in out.splitlines():
        name, state, feats, reason = (line.split("|") + ["", "", ""])[:4]
        feats_l = [] if feats in ("", "(null)") else feats.split(",")
        nodes.setdefault(
            name, Node(name, state, feats_l, "" if reason in ("none", "") else reason)
        )
    chosen = list(nodes.values())
    if opts.nodelist:
        unknown = [n for n in opts.nodelist if n not in nodes]
        if unknown:
            raise SlurmError(
                f"slurm: node {unknown[0]!r} is not in partition {part!r} (nodes: {', '.join(nodes)})"
            )
        chosen = [nodes[n] for n in dict.fromkeys(opts.nodelist)]
    if opts.constraint and all(c.isalnum() or c in "_-." for c in opts.constraint):
        chosen = [n for n in chosen if opts.constraint in n.features]
    if not chosen:
        raise SlurmError(
            f"slurm: no node of partition {part!r} matches constraint {opts.constraint!r}"
        )
    return part, chosen


def node_host(node: str, partition: str) -> Host:
    """The inventory-style view of a node that never ran our job (no fingerprint)."""
    return Host(
        name=node,
        address=node,
        user=getpass.getuser(),
        labels=["slurm", partition]
        if partition.replace("-", "").isalnum()
        else ["slurm"],
    )


def _unpack_snapshot(snap: snapshot_mod.Snapshot, root: Path) -> Path:
    """The snapshot under ``<root>/src/<digest16>`` (atomic; kept when already complete)."""
    src = root / "src" / snap.short
    if (src / ".complete").is_file():
        return src
    tmp = root / "src" / f".{snap.short}.{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(snap.data), mode="r:gz") as tar:
        untar.extract(tar, tmp)
    (tmp / ".complete").touch()
    if src.exists() and not (src / ".complete").is_file():
        import shutil

        shutil.rmtree(src)
    try:
        tmp.rename(src)
    except OSError:  # another run renamed a complete copy first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return src


def _is_safe_part(s: str) -> bool:
    return bool(s) and all(c.isalnum() or c in "_-." for c in s)


class NodeJob:
    """One (node, matrix) job, from submission to artifacts. Never raises for what the job does."""

    def __init__(
        self,
        node: Node,
        partition: str,
        matrix: matrix_mod.Matrix,
        matrix_arg: str,
        snap: snapshot_mod.Snapshot,
        src: Path,
        opts: SlurmOptions,
        root: Path,
        *,
        force: bool,
        retry_failed: bool,
        progress: ProgressFn,
    ):
        self.node, self.partition, self.matrix = node, partition, matrix
        self.snap, self.src, self.opts = snap, src, opts
        self.progress = progress
        self.data = root / "nodes" / node.name / "data"
        self.jobs_dir = root / "nodes" / node.name / "jobs"
        self.matrix_arg = matrix_arg
        self.force, self.retry_failed = force, retry_failed
        self.job_id: str | None = None
        self.state = "NEW"
        self.reason = ""
        self.out_path: Path | None = None
        self.out_pos = 0
        self.buf = ""
        self.reported_host: dict[str, Any] | None = None
        self.backend_versions: dict[str, str] = {}
        self.done: set[tuple] = set()
        self.reported: list[str] = []
        self.label_of: dict[str, tuple] = {}
        self.tail: list[str] = []
        self.error_event: str | None = None
        self.ended = False
        self.t0 = time.monotonic()
        self.outcome = JobOutcome(node.name)
        self.labels = {
            done_label(c.model, c.test.name, c.swept) for c in matrix.configurations()
        }

    # -- submission --------------------------------------------------------------------------------
    def script(self) -> str:
        q = shlex.quote
        python = self.opts.python or sys.executable
        source = json.dumps(
            {
                "digest": self.snap.digest,
                "commit": self.snap.commit,
                "dirty": self.snap.dirty,
            }
        )
        # the job's id and node enter the provenance at run time (printf: no JSON quoting by the shell)
        prov = source[:-1] + ',"slurm":{"job_id":"%s","node":"%s","partition":"%s"}}'
        args = " --force" if self.force else ""
        args += " --retry-failed" if self.retry_failed else ""
        return (
            "#!/bin/bash\n"
            "# written by runtime.remote.slurm: one matrix on one node, exclusive\n"
            "set -u\n"
            f"cd {q(str(self.src))} || exit 3\n"
            f"export ALMANAC_DATA={q(str(self.data))}\n"
            'export ALMANAC_HOST_NAME="${SLURMD_NODENAME:-$(hostname -s)}"\n'
            f'export ALMANAC_SOURCE="$(printf {q(prov)} "$SLURM_JOB_ID" "$ALMANAC_HOST_NAME" '
            f'"${{SLURM_JOB_PARTITION:-}}")"\n'
            f"export PYTHONPATH={q(str(self.src))} PYTHONUNBUFFERED=1\n"
            f"exec {q(python)} -m runtime.remote.agent run --matrix {q(self.matrix_arg)}{args}\n"
        )

    def submit(self) -> None:
        (self.data / "runs").mkdir(parents=True, exist_ok=True)
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        (self.data / "models.yaml").write_bytes(models.registry_path().read_bytes())
        script = self.jobs_dir / f"{self.matrix.name}.sbatch"
        artifacts.atomic_write_text(script, self.script())
        args = [
            "sbatch",
            "--parsable",
            "--exclusive",
            "--nodes=1",
            f"--nodelist={self.node.name}",
            f"--partition={self.partition}",
            f"--time={self.opts.time_limit}",
            f"--job-name=almanac-{self.matrix.name}",
            f"--output={self.jobs_dir}/%j.out",
            f"--chdir={self.jobs_dir}",
        ]
        if self.opts.account:
            args.append(f"--account={self.opts.account}")
        if self.opts.constraint:
            args.append(f"--constraint={self.opts.constraint}")
        out = _slurm([*args, str(script)], f"sbatch for node {self.node.name} refused")
        self.job_id = out.strip().split(";")[0]
        self.out_path = self.jobs_dir / f"{self.job_id}.out"
        self.state = "PENDING"
        self.log(f"submitted job {self.job_id} to {self.partition}/{self.node.name}")
        self.progress(self.node.name, "queued", {"job": self.job_id, "reason": ""})

    # -- while it runs -----------------------------------------------------------------------------
    def log(self, line: str) -> None:
        self.tail = (self.tail + line.splitlines())[-80:]

    def read_output(self) -> None:
        if self.out_path is None or not self.out_path.is_file():
            return
        with open(self.out_path, "rb") as fh:
            fh.seek(self.out_pos)
            chunk = fh.read()
        self.out_pos += len(chunk)
        self.buf += chunk.decode("utf-8", "replace")
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self._line(line)

    def _line(self, line: str) -> None:
        if not line.startswith(PREFIX):
            self.log(line)
            return
        try:
            ev = json.loads(line[len(PREFIX) :])
        except ValueError:
            self.log(line)
            return
        kind = ev.get("event")
        if kind == "host":
            self.reported_host = (
                ev.get("host") if isinstance(ev.get("host"), dict) else None
            )
            self.backend_versions = ev.get("backend_versions") or {}
            self.outcome.host_id = (self.reported_host or {}).get("id")
        elif kind in ("skip", "done"):
            label = done_label(ev.get("model"), ev.get("test"), ev.get("swept") or {})
            self.done.add(label)
            if isinstance(ev.get("path"), str):
                self.reported.append(ev["path"])
                self.label_of[ev["path"]] = label
        elif kind == "error":
            self.error_event = str(ev.get("message"))
        elif kind == "end":
            self.ended = True
        self.progress(self.node.name, kind or "?", ev)

    def update(self, state: str, reason: str) -> None:
        if state != self.state or reason != self.reason:
            self.state, self.reason = state, reason
            if state == "PENDING":
                self.progress(
                    self.node.name, "queued", {"job": self.job_id, "reason": reason}
                )
            elif state == "RUNNING":
                self.progress(
                    self.node.name,
                    "running",
                    {"job": self.job_id, "total": len(self.matrix.configurations())},
                )

    # -- at the end --------------------------------------------------------------------------------
    def finish(self, exit_code: int | None, signal: str | None) -> HostOutcome:
        self.read_output()
        if self.buf:
            self._line(self.buf)
            self.buf = ""
        self._fetch()
        where = f"job {self.job_id} on node {self.node.name}"
        if self.state != "COMPLETED":
            why = {
                "TIMEOUT": f"reached its time limit ({self.opts.time_limit})",
                "CANCELLED": "was cancelled (scancel)",
                "NODE_FAIL": "lost its node (NODE_FAIL)",
            }.get(self.state, f"ended {self.state}")
            reason = (
                f" ({self.reason})"
                if self.reason and self.reason not in ("None", self.state, "TimeLimit")
                else ""
            )
            self._fail(
                ERROR_KIND.get(self.state, "crash"),
                f"{where} {why}{reason}",
                exit_code,
                signal,
            )
        elif exit_code not in (0, None) or self.error_event:
            msg = (
                self.error_event
                or " | ".join(ln for ln in self.tail[-3:] if ln.strip())[-400:]
                or "no output"
            )
            self._fail("error", f"{where} exited {exit_code}: {msg}", exit_code, signal)
        elif any(
            done_label(c.model, c.test.name, c.swept) not in self.done
            for c in self.matrix.configurations()
        ):
            self._fail(
                "error",
                f"{where} returned no artifact for this configuration",
                exit_code,
                signal,
            )
        elif self.outcome.invalid:
            self.outcome.status, self.outcome.error_kind = "failed", "invalid"
            self.outcome.message = (
                f"{where}: {len(self.outcome.invalid)} artifacts refused"
            )
        self.progress(
            self.node.name,
            "finished",
            {"status": self.outcome.status, "message": self.outcome.message},
        )
        return self.outcome

    def _check(self, rel: str, doc: dict[str, Any]) -> str | None:
        """Why an artifact the job reported is not the job's (None: it is)."""
        want = (self.reported_host or {}).get("id")
        got = (doc.get("host") or {}).get("id")
        if not want or got != want:
            return f"host id {got!r} is not the host job {self.job_id} fingerprinted ({want!r})"
        slurm = ((doc.get("build") or {}).get("almanac_source") or {}).get(
            "slurm"
        ) or {}
        if str(slurm.get("job_id")) != str(self.job_id):
            return f"build.almanac_source.slurm.job_id {slurm.get('job_id')!r} is not job {self.job_id}"
        if doc.get("artifact") == "run":
            canonical = run_path(doc, Path(".")).as_posix()
            if rel != canonical:
                return f"its content names {canonical}, not {rel}"
            label = done_label(
                doc["model"]["name"], doc["test"]["name"], doc.get("swept") or {}
            )
            if label not in self.labels:
                return (
                    f"{doc['model']['name']} {doc['test']['name']} "
                    f"is not a configuration of matrix {self.matrix.name}"
                )
        return None

    def _fetch(self) -> None:
        base = (self.data / "runs").resolve()
        local = runs_dir()
        for rel in dict.fromkeys(self.reported):
            p = Path(rel)
            target = (base / p).resolve()
            if p.is_absolute() or ".." in p.parts or not target.is_relative_to(base):
                self.outcome.invalid.append(
                    f"job {self.job_id}: {rel}: refused (path outside the node's data/runs)"
                )
                self._undone(rel)
                continue
            dest = local / p
            if dest.exists():
                continue
            try:
                doc = artifacts.load(target)
            except (OSError, ArtifactError) as exc:
                self.outcome.invalid.append(f"job {self.job_id}: {rel}: {exc}")
                self._undone(rel)
                continue
            why = self._check(rel, doc)
            if why:
                self.outcome.invalid.append(f"job {self.job_id}: {rel}: {why}")
                self._undone(rel)
                continue
            try:  # every request record the run kept beside it comes too (core.request_records)
                request_records.carry(target, doc, dest)
            except ArtifactError as exc:
                self.outcome.invalid.append(f"job {self.job_id}: {rel}: {exc}")
                self._undone(rel)
                continue
            artifacts.write(dest, doc)
            self.outcome.fetched.append(dest)
            (
                self.outcome.measured if doc["status"] == "ok" else self.outcome.failed
            ).append(dest)

    def _undone(self, rel: str) -> None:
        """A refused artifact does not count as finished: its configuration gets a failed artifact."""
        label = self.label_of.get(rel)
        if label is not None:
            self.done.discard(label)

    def _fail(
        self, kind: str, message: str, exit_code: int | None, signal: str | None
    ) -> None:
        o = self.outcome
        o.status, o.error_kind, o.message = "failed", kind, message
        paths = failed_artifacts(
            matrix=self.matrix,
            host=node_host(self.node.name, self.partition),
            kind=kind,
            message=message,
            done=self.done,
            reported_host=self.reported_host,
            backend_versions=self.backend_versions,
            log_tail="\n".join(self.tail[-60:]),
            wall_s=time.monotonic() - self.t0,
            exit_code=exit_code,
            signal=signal,
            remote={
                "scheduler": "slurm",
                "job_id": self.job_id,
                "node": self.node.name,
                "partition": self.partition,
                "state": self.state,
                "reason": self.reason,
                "project": {
                    "digest": self.snap.digest,
                    "commit": self.snap.commit,
                    "dirty": self.snap.dirty,
                },
            },
        )
        o.failed += paths


def _job_states(ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """job id -> (state, reason) for the jobs squeue still knows; None when squeue failed."""
    try:
        res = subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%r"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        # a job id that slurmctld has forgotten makes squeue fail: ask one by one
        if len(ids) > 1:
            merged: dict[str, tuple[str, str]] = {}
            for i in ids:
                one = _job_states([i])
                merged.update(one or {})
            return merged
        return {}
    out: dict[str, tuple[str, str]] = {}
    for line in res.stdout.splitlines():
        jid, state, reason = (line.split("|") + ["", ""])[:3]
        out[jid.strip()] = (
            state.strip().split()[0] if state.strip() else "",
            reason.strip(),
        )
    return out


def job_facts(job_id: str) -> dict[str, Any]:
    """What ``scontrol show job`` still says of a job: exit code, signal, start and end (epoch s)."""
    try:
        res = subprocess.run(
            ["scontrol", "-o", "show", "job", job_id],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    fields = dict(tok.split("=", 1) for tok in res.stdout.split() if "=" in tok)
    facts: dict[str, Any] = {"exit_code": None, "signal": None}
    code, _, sig = fields.get("ExitCode", "").partition(":")
    if code.isdigit():
        facts["exit_code"] = int(code)
    if sig.isdigit() and int(sig):
        import signal as sigmod

        try:
            facts["signal"] = sigmod.Signals(int(sig)).name
        except ValueError:
            facts["signal"] = f"signal {sig}"
    for key, name in (("StartTime", "start"), ("EndTime", "end")):
        try:
            facts[name] = datetime.strptime(
                fields[key], "%Y-%m-%dT%H:%M:%S"
            ).timestamp()
        except (KeyError, ValueError):
            pass
    return facts


def run_slurm(
    matrix: str,
    opts: SlurmOptions,
    *,
    force: bool = False,
    retry_failed: bool = False,
    progress: ProgressFn | None = None,
    poll_s: float = POLL_S,
    chosen: tuple[str, list[Node]] | None = None,
) -> list[HostOutcome]:
    """Submit ``matrix`` to every chosen node, follow the jobs, bring the artifacts home."""
    progress = progress or (lambda name, event, info: None)
    m = matrix_mod.load(matrix)
    models.load_registry()
    partition, nodes = chosen or choose_nodes(opts)
    root = Path(opts.workdir).expanduser() if opts.workdir else cache_dir() / "slurm"
    root = root.resolve()
    snap = snapshot_mod.make()
    src = _unpack_snapshot(snap, root)
    mpath = m.path.resolve()
    try:
        rel = str(mpath.relative_to(project_root()))
    except ValueError:
        rel = None
    jobs: list[NodeJob] = []
    outcomes: list[HostOutcome] = []
    for node in nodes:
        matrix_arg = rel if rel is not None and rel in snap.files else ""
        job = NodeJob(
            node,
            partition,
            m,
            matrix_arg,
            snap,
            src,
            opts,
            root,
            force=force,
            retry_failed=retry_failed,
            progress=progress,
        )
        if not matrix_arg:  # a matrix outside the project: copied (with what it includes) beside the node's data
            mdir = job.data / "matrices"
            for p in _include_chain(mpath):
                target = mdir / p.relative_to(mpath.parent)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(p.read_bytes())
            job.matrix_arg = str(mdir / mpath.name)
        if any(s in node.state.lower() for s in BAD_NODE_STATES):
            job.state = node.state.upper()
            job._fail(
                "unreachable",
                f"node {node.name} is {node.state}"
                + (f" ({node.reason})" if node.reason else "")
                + ": no job submitted",
                None,
                None,
            )
            progress(
                node.name,
                "finished",
                {"status": "failed", "message": job.outcome.message},
            )
            outcomes.append(job.outcome)
            continue
        try:
            job.submit()
        except SlurmError as exc:
            job.state = "REFUSED"
            job._fail("refused", str(exc), None, None)
            progress(
                node.name,
                "finished",
                {"status": "failed", "message": job.outcome.message},
            )
            outcomes.append(job.outcome)
            continue
        jobs.append(job)
    live = list(jobs)
    while live:
        time.sleep(poll_s)
        # every live job was submitted, so each has its id
        ids = [j.job_id for j in live if j.job_id is not None]
        states = _job_states(ids) or {}
        for j in list(live):
            assert j.job_id is not None  # set by submit(), which each live job passed
            j.read_output()
            state, reason = states.get(j.job_id, ("", ""))
            if not state:  # forgotten by slurmctld: judge by what the job wrote
                state = "COMPLETED" if j.ended else "FAILED"
                reason = reason or (
                    "" if j.ended else "the job vanished from the queue"
                )
            j.update(state, reason)
            if state in TERMINAL or state.startswith("CANCELLED"):
                if state.startswith("CANCELLED"):
                    j.state = "CANCELLED"
                facts = job_facts(j.job_id)
                j.outcome.job = {
                    "job_id": j.job_id,
                    "node": j.node.name,
                    "partition": partition,
                    "state": j.state,
                    **facts,
                }
                j.finish(facts.get("exit_code"), facts.get("signal"))
                live.remove(j)
    outcomes += [j.outcome for j in jobs]
    order = {n.name: i for i, n in enumerate(nodes)}
    return sorted(outcomes, key=lambda o: order.get(o.host, 0))


def cancel(job_id: str) -> None:
    _slurm(["scancel", job_id], f"scancel {job_id}")


class SlurmScheduler:
    """Slurm nodes, one exclusive job each (runtime.remote.schedulers: the ``slurm`` scheduler)."""

    name = "slurm"

    def __init__(self, opts: SlurmOptions):
        self.opts = opts
        self._chosen: tuple[str, list[Node]] | None = None

    def targets(self) -> list[str]:
        self._chosen = self._chosen or choose_nodes(self.opts)
        return [n.name for n in self._chosen[1]]

    def run(
        self,
        matrix: str,
        *,
        force: bool = False,
        retry_failed: bool = False,
        progress: ProgressFn | None = None,
    ) -> list[HostOutcome]:
        return run_slurm(
            matrix,
            self.opts,
            force=force,
            retry_failed=retry_failed,
            progress=progress,
            chosen=self._chosen,
        )
