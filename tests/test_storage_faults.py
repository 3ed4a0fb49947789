"""Storage faults are one line: no space left (a small tmpfs), a read-only file system (a read-only
bind mount), permission denied (root without CAP_DAC_OVERRIDE on a folder it may not write), a lock
file that cannot be created. Each ends with one line naming the path and what to do, a non-zero
exit, no traceback and nothing half-written: no partial artifact, no temporary file left.

The mounts need root (and a kernel that lets this container mount tmpfs and bind mounts): the
tests that need them are skipped with the reason otherwise."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_golden_data, tree_snapshot

SAMPLE = ROOT / "tests" / "fixtures" / "llama-bench-sample.json"
MATRIX = "schema_version: 1\nname: m\nmodels: [gemma3-270m-q4_k_m]\ntests: [pp8]\n"
NO_DAC = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]


def _can_mount() -> str | None:
    """None when this process can mount a tmpfs, else why not."""
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs and a read-only bind mount"
    if not shutil.which("mount"):
        return "no mount(8) here"
    probe = Path(f"/tmp/almanac-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe)],
            capture_output=True,
            text=True,
        )
        if r.returncode:
            return f"cannot mount here: {r.stderr.strip()}"
        subprocess.run(["umount", str(probe)], check=True)
        return None
    finally:
        probe.rmdir()


MOUNT_SKIP = _can_mount()
needs_mount = pytest.mark.skipif(MOUNT_SKIP is not None, reason=MOUNT_SKIP or "")
needs_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="permission denied is only tested as root without CAP_DAC_OVERRIDE (setpriv)",
)


@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@contextlib.contextmanager
def read_only(src: Path, where: Path):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(src), str(where)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def seed(data: Path) -> Path:
    """A data folder with the real model registry and a one-test matrix."""
    (data / "matrices").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "data" / "models.yaml", data / "models.yaml")
    (data / "matrices" / "m.yaml").write_text(MATRIX)
    return data


def fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to the last byte."""
    with open(folder / "ballast", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
        try:
            while True:
                fh.write(b"\0")
        except OSError:
            pass


def invoke(
    args: list[str], data: Path, prefix: list[str] | None = None
) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        PYTHONPATH=str(ROOT),
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
        COLUMNS="200",
    )
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The run failed with exactly one line on stderr that holds every needle, and no traceback."""
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text[-3000:]
    assert proc.returncode == 2, (proc.returncode, text[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def no_temp_files(data: Path) -> None:
    left = [p for p in data.rglob("*") if p.is_file() and p.name.endswith(".tmp")]
    assert left == [], left


def import_args(embedded_model) -> list[str]:
    return [
        "import.llama-bench",
        str(SAMPLE),
        "--host-name",
        "bench-box",
        "--model",
        str(embedded_model.path),
    ]


# -- no space left --------------------------------------------------------------------------------
@needs_mount
def test_full_disk_on_import_is_one_line_and_writes_nothing(tmp_path, embedded_model):
    with tmpfs(tmp_path / "full", "64k") as data:
        seed(data)
        fill(data)
        before = tree_snapshot(data)
        line = one_line(
            invoke(import_args(embedded_model), data),
            "no space left",
            "runs/bench-box-",
            ".json",
            "free space there",
        )
        assert line.startswith("error: ")
        assert (
            tree_snapshot(data) == before
        )  # no artifact, whole or partial, and no temporary file
        no_temp_files(data)


@needs_mount
def test_full_disk_refuses_a_bench_before_measuring(tmp_path, embedded_model):
    with tmpfs(tmp_path / "full", "64k") as data:
        seed(data)
        fill(data)
        proc = invoke(["bench", "--matrix", "m"], data)
        one_line(proc, ".run.lock", "cannot create the run lock", "no space left")
        assert (
            not list((data / "runs").rglob("*.json"))
            if (data / "runs").exists()
            else True
        )
        no_temp_files(data)


@needs_mount
def test_room_for_some_artifacts_leaves_each_whole(tmp_path, embedded_model):
    """The disk fills up in the middle of an import: the files written are whole artifacts (valid),
    the one that did not fit is absent, and a rerun with room imports the rest."""
    with tmpfs(tmp_path / "full", "96k") as data:
        seed(data)
        # leave room for about one artifact (each is about 5 KiB on this file system)
        fill(data)
        ballast = data / "ballast"
        with open(ballast, "r+b") as fh:
            fh.truncate(max(0, ballast.stat().st_size - 12 * 1024))
        proc = invoke(import_args(embedded_model), data)
        one_line(proc, "no space left")
        written = list((data / "runs").rglob("*.json"))
        assert 1 <= len(written) < len(json.loads(SAMPLE.read_text())), written
        assert invoke(["validate"], data).returncode == 0
        no_temp_files(data)
        ballast.unlink()
        again = invoke(import_args(embedded_model), data)
        assert again.returncode == 0, again.stderr
        assert "already there" in again.stdout
        assert invoke(["validate"], data).returncode == 0


@needs_mount
def test_full_disk_while_building_the_site_is_one_line(tmp_path):
    data = make_golden_data(tmp_path / "golden")
    with tmpfs(tmp_path / "out", "256k") as out:
        proc = invoke(["site.build", "--output", str(out / "site")], data)
        one_line(
            proc,
            "cannot write the site",
            "no space left",
            str(out / "site"),
            "--output",
        )


# -- read-only -------------------------------------------------------------------------------------
@needs_mount
def test_read_only_data_folder_refuses_bench_and_import(tmp_path, embedded_model):
    src = seed(tmp_path / "src")
    before = tree_snapshot(src)
    with read_only(src, tmp_path / "ro") as data:
        bench = invoke(["bench", "--matrix", "m"], data)
        one_line(bench, ".run.lock", "read-only", "ALMANAC_DATA")
        imported = invoke(import_args(embedded_model), data)
        one_line(imported, "runs/bench-box-", "read-only")
        assert (
            invoke(["validate"], data).returncode == 0
        )  # reading a read-only folder is fine
    assert tree_snapshot(src) == before


@needs_mount
def test_read_only_site_folder_is_one_line(tmp_path):
    data = make_golden_data(tmp_path / "golden")
    (tmp_path / "outsrc").mkdir()
    with read_only(tmp_path / "outsrc", tmp_path / "out") as out:
        one_line(
            invoke(["site.build", "--output", str(out / "site")], data),
            "cannot write the site",
            "read-only",
        )


# -- permission denied -----------------------------------------------------------------------------
@needs_setpriv
def test_permission_denied_is_one_line(tmp_path, embedded_model):
    data = seed(tmp_path / "data")
    (data / "runs").mkdir()
    data.chmod(0o555)
    (data / "runs").chmod(0o555)
    before = tree_snapshot(data)
    try:
        one_line(
            invoke(["bench", "--matrix", "m"], data, prefix=NO_DAC),
            ".run.lock",
            "permission denied",
        )
        one_line(
            invoke(import_args(embedded_model), data, prefix=NO_DAC),
            "runs/bench-box-",
            "permission denied",
        )
    finally:
        data.chmod(0o755)
        (data / "runs").chmod(0o755)
    assert tree_snapshot(data) == before


# -- a lock file that cannot be created (no root needed) -------------------------------------------
def test_lock_file_that_cannot_be_created_is_one_line(tmp_path):
    from runtime.hosts import fingerprint

    data = seed(tmp_path / "data")
    lock = data / "runs" / fingerprint.fingerprint()["id"] / ".run.lock"
    lock.mkdir(parents=True)  # a folder where the lock file goes
    line = one_line(
        invoke(["bench", "--matrix", "m"], data),
        ".run.lock",
        "cannot create the run lock",
        "remove it",
    )
    assert line.startswith("error: ")
    assert lock.is_dir() and not any(lock.iterdir())


def test_storage_error_names_path_and_remedy(tmp_path):
    """The one place that words a storage fault (core.artifacts.storage_error), for every errno it knows."""
    import errno

    from core.artifacts import STORAGE_ERRNOS, storage_error

    for e in STORAGE_ERRNOS:
        err = storage_error(OSError(e, os.strerror(e)), tmp_path / "x.json")
        assert str(err).startswith(str(tmp_path / "x.json") + ": cannot write: ")
        assert "ALMANAC_DATA" in str(err)
    assert (
        errno.ENOSPC in STORAGE_ERRNOS
        and errno.EROFS in STORAGE_ERRNOS
        and errno.EACCES in STORAGE_ERRNOS
    )
