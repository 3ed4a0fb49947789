"""Run a matrix on inventory hosts over SSH and bring the artifacts home.

For each host (several in parallel, one thread each, each with its own log file):

1. connect (runtime.remote.ssh: verified host key, the entry's key only);
2. put the project snapshot there (runtime.remote.snapshot; unpacked once per digest
   under ``<workdir>/src/<digest>``), the model registry and the matrix under
   ``<workdir>/data``;
3. ``agent prepare``: a venv with the pinned dependencies, pip only when they changed,
   an existing llama-cpp-python of the pinned version reused (or ``install: system``);
4. ``agent run``: the matrix through runtime.execution.runner on the host (host fingerprint taken
   there, artifacts written there first, so a cut connection loses nothing finished);
5. fetch every artifact the run reported, validate it, write it under data/runs/.

A host that is unreachable, refuses us, crashes or runs out of time yields failed
artifacts (runtime.remote.failed) for the configurations it did not finish; the other
hosts go on. Secrets (the key passphrase) are redacted from everything written.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import artifacts, request_records
from core.errors import ArtifactError
from core.paths import cache_dir, project_root, relpath, runs_dir, slug
from core.records import run as run_record
from core.yamlio import quote
from runtime.execution import matrix as matrix_mod
from runtime.hosts.inventory import Host
from runtime.models import registry as models
from runtime.remote import snapshot as snapshot_mod
from runtime.remote.agent import PREFIX
from runtime.remote.failed import done_label, failed_artifacts
from runtime.remote.ssh import RemoteFailure, connect, redact, secrets_of

ProgressFn = Callable[[str, str, dict[str, Any]], None]  # (host name, event, info)
KILL_GRACE_S = 10
MAX_LINE_CHARS = 1 << 20  # a line of a host's output (an event) longer than this is cut


@dataclass
class HostOutcome:
    host: str
    status: str = "ok"  # ok | failed
    error_kind: str | None = None
    message: str | None = None
    measured: list[Path] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    fetched: list[Path] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    log: Path | None = None
    host_id: str | None = None


class _Lines(io.TextIOBase):
    """A write-only stream that hands complete lines to ``on_line``."""

    def __init__(self, on_line: Callable[[str], None]):
        self.buf = ""
        self.on_line = on_line

    def write(self, s: str) -> int:
        self.buf += s
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.on_line(line)
        if (
            len(self.buf) > MAX_LINE_CHARS
        ):  # a host printing without end: cut, never held whole
            line, self.buf = self.buf[:MAX_LINE_CHARS], ""
            self.on_line(line + " [line cut]")
        return len(s)

    def flush(self) -> None:  # invoke flushes after every chunk: keep a partial line
        pass

    def finish(self) -> None:
        if self.buf:
            line, self.buf = self.buf, ""
            self.on_line(line)


class HostRun:
    """One host, end to end. ``run()`` never raises for what the host does."""

    def __init__(
        self,
        host: Host,
        matrix: matrix_mod.Matrix,
        snap: snapshot_mod.Snapshot,
        *,
        force: bool = False,
        retry_failed: bool = False,
        log_dir: Path,
        progress: ProgressFn | None = None,
    ):
        self.host = host
        self.matrix = matrix
        self.snap = snap
        self.force = force
        self.retry_failed = retry_failed
        self.progress = progress or (lambda name, event, info: None)
        self.secrets = secrets_of(host)
        self.log_path = log_dir / f"{host.name}.log"
        self.outcome = HostOutcome(host.name, log=self.log_path)
        self.reported_host: dict[str, Any] | None = None
        self.backend_versions: dict[str, str] = {}
        self.done: set[tuple] = set()
        self.reported: list[str] = []  # artifact paths relative to the host's data/runs
        self.reported_labels: dict[
            str, tuple
        ] = {}  # path -> the configuration it was reported for
        self.tail: list[str] = []
        self.error_event: str | None = None
        self.python: str | None = None
        self.fetched = False  # _fetch ran (a failure after it does not fetch again)
        self.bad_fingerprint: str | None = (
            None  # why the host's reported fingerprint was refused
        )
        self.configs = {
            done_label(c.model, c.test.name, c.swept): c
            for c in matrix.configurations()
        }
        self.t0 = time.monotonic()
        self._log_lock = threading.Lock()

    # -- logging ------------------------------------------------------------------------------
    def log(self, text: str) -> None:
        text = redact(text, self.secrets)
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        with self._log_lock:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                for line in text.splitlines() or [""]:
                    fh.write(f"{stamp} {line}\n")
            self.tail = (self.tail + text.splitlines())[-80:]

    def remaining(self) -> float:
        return self.host.timeout_s - (time.monotonic() - self.t0)

    # -- remote commands ------------------------------------------------------------------------
    def _on_stdout(self, line: str) -> None:
        if line.startswith(PREFIX):
            try:
                event = json.loads(line[len(PREFIX) :])
            except ValueError:
                self.log(line)
                return
            self._event(event)
            return
        self.log(line)

    def _event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "host":
            fp = ev.get("host")
            why = fingerprint_problem(fp, self.host.name)
            versions = ev.get("backend_versions")
            self.backend_versions = (
                {str(k): str(v)[:200] for k, v in versions.items()}
                if isinstance(versions, dict)
                else {}
            )
            if why:  # nothing this host returns can be checked against it: none of it is taken
                self.bad_fingerprint = why
                self.reported_host = None
                self.outcome.host_id = None
                self.log(f"host fingerprint refused: {why}")
            else:
                assert isinstance(fp, dict)  # fingerprint_problem refuses any other
                self.reported_host = fp
                self.outcome.host_id = fp["id"]
                self.log(f"host fingerprint: {self.outcome.host_id}")
        elif kind in ("skip", "done"):
            self.done.add(
                done_label(ev.get("model"), ev.get("test"), ev.get("swept") or {})
            )
            if (
                ev.get("path") and len(self.reported) < 10 * len(self.configs) + 100
            ):  # bounded
                self.reported.append(ev["path"])
                if isinstance(ev["path"], str):
                    self.reported_labels[ev["path"]] = done_label(
                        ev.get("model"), ev.get("test"), ev.get("swept") or {}
                    )
            self.log(
                f"[{ev.get('index')}/{ev.get('total')}] {ev.get('model')} {ev.get('test')}: "
                f"{ev.get('status')}{' (already measured)' if kind == 'skip' else ''}"
            )
        elif kind == "error":
            self.error_event = ev.get("message")
        elif kind == "incompatible":
            self.error_event = "; ".join(ev.get("problems") or [])
        elif kind == "python":
            self.python = ev.get("path")
        self.progress(self.host.name, kind or "?", ev)

    def remote(self, conn: Any, command: str, what: str) -> int:
        """Run ``command`` on the host under a time limit; stream its output to the log."""
        limit = int(self.remaining())
        if limit <= 0:
            raise RemoteFailure(
                "timeout",
                f"{self.host.name}: no time left for {what} (timeout_s {self.host.timeout_s:g})",
            )
        wrapped = f"timeout -k {KILL_GRACE_S} {limit} sh -c {shlex.quote(command)}"
        self.log(f"$ {command}")
        out, err = _Lines(self._on_stdout), _Lines(self.log)
        from invoke.exceptions import CommandTimedOut

        started = time.monotonic()
        try:
            res = conn.run(
                wrapped,
                hide=True,
                warn=True,
                out_stream=out,
                err_stream=err,
                in_stream=False,
                timeout=limit + KILL_GRACE_S + 20,
            )
        except CommandTimedOut:
            raise RemoteFailure(
                "timeout",
                f"{self.host.name}: {what} still running after {limit} s; stopped",
            ) from None
        finally:
            out.finish()
            err.finish()
        code = res.exited
        took = time.monotonic() - started
        if code in (124, 137) and took >= limit - 1:
            raise RemoteFailure(
                "timeout",
                f"{self.host.name}: {what} did not finish within the host's "
                f"timeout_s ({self.host.timeout_s:g} s); stopped on the host",
                exit_code=code,
            )
        return code

    # -- steps ------------------------------------------------------------------------------------
    def _home(self, conn: Any) -> str:
        res = conn.run('printf %s "$HOME"', hide=True, warn=True, in_stream=False)
        return res.stdout.strip() or "/tmp"

    def _workdir(self, conn: Any) -> str:
        w = self.host.workdir
        if w.startswith("~"):
            w = self._home(conn) + w[1:]
        return w.rstrip("/")

    def _put_snapshot(self, conn: Any, w: str) -> str:
        import hashlib

        src = f"{w}/src/{self.snap.short}"
        probe = conn.run(
            f"test -f {shlex.quote(src)}/.complete",
            hide=True,
            warn=True,
            in_stream=False,
        )
        if probe.exited == 0:
            self.log(f"project {self.snap.describe()} already at {src}")
            return src
        conn.run(f"mkdir -p {shlex.quote(w)}/src", hide=True, in_stream=False)
        import uuid

        tag = uuid.uuid4().hex[
            :8
        ]  # several runs may share a workdir: nothing of theirs is touched
        tarball = f"{w}/src/.{self.snap.short}.{tag}.tar.gz"
        tmp = f"{w}/src/.{self.snap.short}.{tag}"
        conn.put(io.BytesIO(self.snap.data), remote=tarball)
        want = hashlib.sha256(self.snap.data).hexdigest()
        q = shlex.quote
        # unpack beside, then rename into place (atomic); an incomplete leftover is replaced,
        # a complete copy that another run renamed first is kept
        cmd = (
            f"test \"$(sha256sum {q(tarball)} | cut -d' ' -f1)\" = {want} && mkdir -p {q(tmp)} "
            f"&& tar -xzf {q(tarball)} -C {q(tmp)} && touch {q(tmp)}/.complete && rm -f {q(tarball)} "
            f"&& {{ [ -f {q(src)}/.complete ] || rm -rf {q(src)}; }} "
            f"&& {{ mv -T {q(tmp)} {q(src)} 2>/dev/null || rm -rf {q(tmp)}; }} && test -f {q(src)}/.complete"
        )
        res = conn.run(cmd, hide=True, warn=True, in_stream=False)
        if res.exited != 0:
            conn.run(
                f"rm -rf {q(tmp)} {q(tarball)}", hide=True, warn=True, in_stream=False
            )
            raise RemoteFailure(
                "error",
                f"{self.host.name}: unpacking the project failed ({res.stderr.strip()[-300:]})",
            )
        self.log(
            f"project {self.snap.describe()}: {len(self.snap.files)} files, {len(self.snap.data)} bytes -> {src}"
        )
        return src

    def _put_data(self, conn: Any, w: str, src: str) -> str:
        """models.yaml and the matrix under <workdir>/data; the matrix path to give the agent."""
        from runtime.models.registry import registry_path

        data = f"{w}/data"
        conn.run(
            f"mkdir -p {shlex.quote(data)}/matrices {shlex.quote(data)}/runs",
            hide=True,
            in_stream=False,
        )
        conn.put(io.BytesIO(registry_path().read_bytes()), remote=f"{data}/models.yaml")
        mpath = self.matrix.path.resolve()
        try:
            rel = str(mpath.relative_to(project_root()))
        except ValueError:
            rel = None
        if rel is not None and rel in self.snap.files:
            return rel  # it travels in the snapshot: the same relative path there
        # a matrix outside the project: upload it (and the files it includes) beside each other
        base = mpath.parent
        for p in _include_chain(mpath):
            target = f"{data}/matrices/{p.relative_to(base)}"
            conn.run(
                f"mkdir -p {shlex.quote(str(Path(target).parent))}",
                hide=True,
                in_stream=False,
            )
            conn.put(io.BytesIO(p.read_bytes()), remote=target)
        return f"{data}/matrices/{mpath.name}"

    def _env(self, w: str, src: str) -> str:
        source = json.dumps(
            {
                "digest": self.snap.digest,
                "commit": self.snap.commit,
                "dirty": self.snap.dirty,
            },
            separators=(",", ":"),
        )
        env = {
            **self.host.env,
            "ALMANAC_DATA": f"{w}/data",
            "ALMANAC_HOST_NAME": self.host.name,
            "ALMANAC_SOURCE": source,
            "PYTHONPATH": src,
            "PYTHONUNBUFFERED": "1",
        }
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())

    def _fetch(self, conn: Any, w: str) -> None:
        """Bring home every artifact the host reported, each read with a size bound and taken only
        when it is this host's (its fingerprint), of this job (a configuration of the matrix) and at
        its own canonical path under the host's folder (:meth:`_refusal`); the rest is refused, one
        line each in ``outcome.invalid``, and its configuration counts as not measured."""
        self.fetched = True
        if not self.reported:
            return
        sftp = conn.sftp()
        local_root = runs_dir()
        with tempfile.TemporaryDirectory(prefix="almanac-fetch-") as td:
            for rel in dict.fromkeys(self.reported):
                if (
                    not isinstance(rel, str)
                    or rel.startswith("/")
                    or ".." in Path(rel).parts
                ):
                    self._refuse(rel, "refused (path outside data/runs)")
                    continue
                if self.outcome.host_id is None:
                    self._refuse(
                        rel, "refused (the host reported no valid fingerprint)"
                    )
                    continue
                if Path(rel).parts[:1] != (self.outcome.host_id,):
                    self._refuse(
                        rel,
                        f"refused: not in the host's own folder ({self.outcome.host_id}/)",
                    )
                    continue
                if (local_root / rel).exists():
                    continue  # taken (and checked) by an earlier run: nothing to fetch or write
                # named as on the host: the sidecar of its request records is named after it
                tmp = Path(td) / Path(rel).name
                try:
                    _get_bounded(
                        sftp, f"{w}/data/runs/{rel}", tmp, MAX_REMOTE_ARTIFACT_BYTES
                    )
                    doc = artifacts.load(tmp)
                except (OSError, ArtifactError) as exc:
                    self._refuse(rel, str(exc))
                    continue
                why = self._refusal(rel, doc, local_root)
                if why:
                    self._refuse(rel, f"refused: {why}", doc)
                    continue
                target = run_record.run_path(doc, local_root)
                if target.exists():
                    continue
                full = request_records.full_file(doc)
                try:  # every request record the run kept beside it comes too, checked
                    if full is not None:
                        side = request_records.sidecar_path(tmp)
                        _get_bounded(
                            sftp,
                            f"{w}/data/runs/{request_records.sidecar_path(Path(rel)).as_posix()}",
                            side,
                            int(full.get("bytes") or 0),
                        )
                        request_records.carry(tmp, doc, target)
                except (OSError, ArtifactError) as exc:
                    self._refuse(rel, f"refused: its request records: {exc}", doc)
                    continue
                artifacts.write(target, doc)
                self.outcome.fetched.append(target)
                bucket = (
                    self.outcome.measured
                    if doc["status"] == "ok"
                    else self.outcome.failed
                )
                bucket.append(target)
        self.log(
            f"fetched {len(self.outcome.fetched)} artifacts into {relpath(local_root)}"
        )

    def _refuse(self, rel: Any, why: str, doc: dict[str, Any] | None = None) -> None:
        line = " ".join(
            f"{quote(rel, 160) if not isinstance(rel, str) else rel[:200]}: {why}".split()
        )
        self.outcome.invalid.append(line)
        self.log(f"fetch {line}")
        label = self._label_of_reported(rel)
        if label is not None:
            self.done.discard(
                label
            )  # not measured after all: a failed artifact says so

    def _label_of_reported(self, rel: Any) -> tuple | None:
        return self.reported_labels.get(rel) if isinstance(rel, str) else None

    def _refusal(self, rel: str, doc: dict[str, Any], local_root: Path) -> str:
        """Why ``doc``, reported at ``rel``, is not this host's result of this job ("" when it is)."""
        hid = self.outcome.host_id
        host = doc.get("host") or {}
        if host.get("id") != hid:
            return f"names host {quote(host.get('id'), 60)}, not this host's fingerprint {hid}"
        if host.get("name") != (self.reported_host or {}).get("name"):
            return f"names host {quote(host.get('name'), 60)}, not {quote((self.reported_host or {}).get('name'), 60)}"
        settings = doc.get("settings") or {}
        label = done_label(
            doc["model"].get("name"),
            doc["test"].get("name"),
            settings.get("swept") or {},
        )
        cfg = self.configs.get(label)
        if cfg is None:
            return (
                f"model {quote(doc['model'].get('name'), 60)}, test {quote(doc['test'].get('name'), 60)} "
                f"is not a configuration of matrix {self.matrix.name}"
            )
        if doc.get("backend") != cfg.backend:
            return f"backend {quote(doc.get('backend'), 40)}, not the matrix's {cfg.backend}"
        if doc["test"] != cfg.test.to_dict():
            return f"test {cfg.test.name} differs from the matrix's definition of it"
        if label != self.reported_labels.get(rel, label):
            return "is not the configuration the host reported at this path"
        own = run_record.run_path(doc, local_root)
        if own != local_root / rel:
            return f"is not at its own path in the host's folder ({relpath(own)})"
        return ""

    # -- the whole thing ------------------------------------------------------------------------
    def run(self) -> HostOutcome:
        h = self.host
        self.log(
            f"host {h.name} ({h.user}@{h.address}:{h.port}), matrix {self.matrix.name}, project {self.snap.describe()}"
        )
        self.progress(h.name, "connect", {})
        conn = None
        w = None
        try:
            conn = connect(h)
            w = self._workdir(conn)
            src = self._put_snapshot(conn, w)
            matrix_arg = self._put_data(conn, w, src)
            q = shlex.quote
            self.progress(h.name, "prepare", {})
            prep = (
                f"cd {q(src)} && {q(h.python)} -m runtime.remote.agent prepare --mode {h.install} "
                f"--workdir {q(w)} --requirements {q(src + '/' + snapshot_mod.REQUIREMENTS)}"
                + (" --reuse-llama" if h.llama_cpp.reuse else "")
                + (
                    f" --cmake-args {q(h.llama_cpp.cmake_args)}"
                    if h.llama_cpp.cmake_args
                    else ""
                )
            )
            code = self.remote(conn, prep, "prepare")
            if code == 4:
                raise RemoteFailure(
                    "incompatible",
                    f"{h.name}: {self.error_event or 'the host Python lacks requirements'}",
                    exit_code=code,
                )
            if code != 0 or not self.python:
                raise RemoteFailure(
                    "error",
                    f"{h.name}: preparing the Python environment failed (exit {code}): "
                    f"{self._last_lines()}",
                    exit_code=code,
                )
            python = (
                h.python if h.install == "system" else self.python
            )  # system: exactly the inventory's
            run = (
                f"cd {q(src)} && {self._env(w, src)} {q(python)} -m runtime.remote.agent run --matrix {q(matrix_arg)}"
                + (" --force" if self.force else "")
                + (" --retry-failed" if self.retry_failed else "")
            )
            self.progress(h.name, "run", {"total": len(self.matrix.configurations())})
            code = self.remote(conn, run, "the matrix")
            if self.bad_fingerprint:
                raise RemoteFailure(
                    "error",
                    f"{h.name}: its fingerprint {self.bad_fingerprint}: nothing it returned is taken",
                )
            if code == 2 and self.error_event:
                raise RemoteFailure(
                    "error", f"{h.name}: {self.error_event}", exit_code=code
                )
            if code != 0:
                sig = _signal_of(code)
                raise RemoteFailure(
                    "crash",
                    f"{h.name}: the remote run ended with exit code {code}"
                    + (f" ({sig})" if sig else "")
                    + f": {self._last_lines()}",
                    exit_code=code,
                    signal=sig,
                )
            self._fetch(conn, w)
            if (
                self.outcome.invalid
            ):  # what it returned was not its own measurement of this job
                raise RemoteFailure(
                    "error",
                    f"{h.name}: {len(self.outcome.invalid)} returned artifact(s) refused: {self.outcome.invalid[0]}",
                )
        except RemoteFailure as exc:
            self._fail(
                exc.kind,
                exc.message,
                conn,
                w,
                exit_code=exc.exit_code,
                signal=exc.signal,
            )
        except (
            Exception
        ) as exc:  # anything else the host did to us: data, and the other hosts go on
            self._fail("error", f"{h.name}: {type(exc).__name__}: {exc}", conn, w)
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass
        self.progress(
            h.name,
            "finished",
            {"status": self.outcome.status, "message": self.outcome.message},
        )
        return self.outcome

    def _last_lines(self, n: int = 3) -> str:
        lines = [ln for ln in self.tail if ln.strip() and not ln.startswith("$ ")]
        return " | ".join(lines[-n:])[-600:] or "no output"

    def _fail(
        self,
        kind: str,
        message: str,
        conn: Any,
        w: str | None,
        *,
        exit_code: int | None = None,
        signal: str | None = None,
    ) -> None:
        message = redact(message, self.secrets)
        self.outcome.status, self.outcome.error_kind, self.outcome.message = (
            "failed",
            kind,
            message,
        )
        self.log(f"FAILED ({kind}): {message}")
        if conn is not None and w is not None and self.reported and not self.fetched:
            try:  # keep what the host finished before it failed
                self._fetch(conn, w)
            except Exception as exc:
                self.log(f"fetching finished artifacts failed: {exc}")
        remote = {
            "inventory_host": self.host.name,
            "address": self.host.address,
            "port": self.host.port,
            "project": {
                "digest": self.snap.digest,
                "commit": self.snap.commit,
                "dirty": self.snap.dirty,
            },
        }
        common: dict[str, Any] = {
            "matrix": self.matrix,
            "host": self.host,
            "kind": kind,
            "message": message,
            "done": self.done,
            "backend_versions": self.backend_versions,
            "log_tail": redact("\n".join(self.tail[-60:]), self.secrets),
            "wall_s": time.monotonic() - self.t0,
            "exit_code": exit_code,
            "signal": signal,
            "remote": remote,
        }
        try:
            paths = failed_artifacts(reported_host=self.reported_host, **common)
        except (
            ArtifactError
        ) as exc:  # a fingerprint the schema refuses: the inventory's view instead
            self.log(
                f"the host's fingerprint cannot be recorded ({exc}); failed artifacts name the inventory host"
            )
            paths = failed_artifacts(
                reported_host=None,
                backend_versions={},
                **{k: v for k, v in common.items() if k != "backend_versions"},
            )
        self.outcome.failed += paths
        self.log(f"wrote {len(paths)} failed artifacts")


MAX_REMOTE_ARTIFACT_BYTES = (
    artifacts.MAX_ARTIFACT_BYTES
)  # an artifact a host returns is read up to this
_HOST_ID = re.compile(
    r"[a-z0-9][a-z0-9-]{0,119}"
)  # the run schema's host id, at most 120 characters


def fingerprint_problem(fp: Any, host_name: str) -> str:
    """Why a fingerprint reported by inventory host ``host_name`` cannot be this host's ("" when it
    can): not an object, no id, an id that is not a host id (a path such as ``../../etc``), or one
    that is not of this host (a fingerprint's id is ``<slug(name)>-<hash>``, and the host was given
    its inventory name)."""
    if not isinstance(fp, dict):
        return f"is {quote(fp, 60)}, not an object"
    hid = fp.get("id")
    if hid is None:
        return "has no id"
    if not isinstance(hid, str) or not _HOST_ID.fullmatch(hid):
        return f"has the id {quote(hid, 80)}, not a host id (lowercase letters, digits and dashes)"
    prefix = slug(host_name) + "-"
    if not hid.startswith(prefix) or fp.get("name") != host_name:
        return (
            f"has the id {hid} and name {quote(fp.get('name'), 60)}, "
            f"not those of inventory host {host_name} ({prefix}...)"
        )
    return ""


def _get_bounded(sftp: Any, remote: str, local: Path, limit: int) -> None:
    """Copy ``remote`` to ``local`` reading at most ``limit`` bytes (a host may serve an endless file,
    or lie in its stat); more is an OSError naming the bound."""
    with sftp.open(remote, "rb") as src, open(local, "wb") as dst:
        total = 0
        while True:
            block = src.read(min(1 << 20, limit + 1 - total))
            if not block:
                break
            total += len(block)
            if total > limit:
                raise OSError(f"more than {limit} bytes: refused unread")
            dst.write(block)


def _signal_of(code: int | None) -> str | None:
    import signal as sigmod

    if code is None or code <= 128 or code > 128 + 64:
        return None
    try:
        return sigmod.Signals(code - 128).name
    except ValueError:
        return None


def _include_chain(path: Path) -> list[Path]:
    out = [path]
    from core.yamlio import load_yaml

    raw = load_yaml(path)
    while isinstance(raw, dict) and raw.get("include"):
        nxt = (out[-1].parent / raw["include"]).resolve()
        if nxt in out or not nxt.exists():
            break
        out.append(nxt)
        raw = load_yaml(nxt)
    return out


def run_hosts(
    hosts: list[Host],
    matrix: str,
    *,
    force: bool = False,
    retry_failed: bool = False,
    log_dir: Path | None = None,
    progress: ProgressFn | None = None,
) -> list[HostOutcome]:
    """Run ``matrix`` on every host in parallel. All local input (matrix, registry) is
    validated before any connection; each host's failure is its own."""
    m = matrix_mod.load(matrix)
    models.load_registry()
    snap = snapshot_mod.make()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log_dir = log_dir or cache_dir() / "remote-logs" / stamp
    log_dir.mkdir(parents=True, exist_ok=True)
    runs = [
        HostRun(
            h,
            m,
            snap,
            force=force,
            retry_failed=retry_failed,
            log_dir=log_dir,
            progress=_shown_or_skipped(progress),
        )
        for h in hosts
    ]
    with ThreadPoolExecutor(
        max_workers=max(1, len(runs)), thread_name_prefix="almanac-host"
    ) as pool:
        return list(pool.map(lambda r: r.run(), runs))


def _shown_or_skipped(progress: ProgressFn | None) -> ProgressFn | None:
    """``progress`` whose failure to show a line (a remote's text it cannot print) is one plain line on
    stderr, never the loss of the host's run and of the per-host summary."""
    if progress is None:
        return None

    def call(name: str, event: str, info: dict[str, Any]) -> None:
        try:
            progress(name, event, info)
        except Exception as exc:
            print(
                f"{name}: a progress line could not be shown ({type(exc).__name__})",
                file=sys.stderr,
            )

    return call
