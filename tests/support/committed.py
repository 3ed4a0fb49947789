"""The project's committed data, apart from whatever the live data/ folder holds now.

A user's `invoke all` measures its own host into data/ (data/runs/<host>/, data/hosts/<host>/, ...).
Issues 19 and 28: tests that read the live folder met the new host's rows and failed. Tests read
committed data only, from here:

* **The rule.** The committed data folder is the files git tracks under data/ (``git ls-files
  data``: inputs and artifacts alike), as the working tree has them (an edited input is seen; a new
  input is seen once ``git add``-ed); a tracked file the working tree lacks is left out.
* **Outside a git checkout** (git missing, or data/ not in a work tree that tracks it) nothing tells a
  user's measurements from the committed ones, so the suite refuses, loudly, naming the way out:
  ``ALMANAC_TEST_DATA=<folder>``, a data folder holding only committed files (say an unpacked release
  archive's data/), is then taken whole instead.

``committed_data(dest)`` copies that folder (tests/conftest.py points ``ALMANAC_DATA`` at one such copy
for the whole session and guards the live folder); ``committed_runs()`` and friends read it in place.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Folders of measured artifacts (the golden sets swap these for fixtures; everything else under data/ is an input).
ARTIFACT_DIRS = ("runs", "hosts", "projections", "quality", "perplexity")
OVERRIDE_ENV = "ALMANAC_TEST_DATA"


class NoCommittedData(RuntimeError):
    """The committed files under data/ cannot be told apart from a user's own measurements."""


def committed_root(root: Path = ROOT) -> Path:
    """The folder the committed files are read from: the checkout's data/, or ``ALMANAC_TEST_DATA``."""
    override = os.environ.get(OVERRIDE_ENV)
    return Path(override).resolve() if override else root / "data"


@functools.cache
def tracked_files(root: Path = ROOT) -> tuple[str, ...]:
    """Every committed file under data/ (inputs and artifacts; paths relative to data/), sorted."""
    base = committed_root(root)
    if os.environ.get(OVERRIDE_ENV):
        if not base.is_dir():
            raise NoCommittedData(f"{OVERRIDE_ENV}={base} is not a folder")
        return tuple(
            sorted(
                p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()
            )
        )
    why = ""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--", "data"],
            capture_output=True,
            timeout=60,
        )
        if proc.returncode:
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"git exited {proc.returncode}"
        rels = [
            p[len("data/") :]
            for p in proc.stdout.decode().split("\0")
            if p.startswith("data/")
        ]
        if not why and not rels:
            why = f"git tracks no file under {base}"
    except (OSError, subprocess.SubprocessError) as exc:
        why = f"git could not run ({exc})"
    if why:
        raise NoCommittedData(
            f"the tests read only the data git tracks, and cannot tell it apart from measurements here: {why}. "
            f"Run them in a git checkout of the project, or set {OVERRIDE_ENV} to a data folder that holds only "
            "committed files (tests/support/committed.py)"
        )
    return tuple(sorted(r for r in rels if (base / r).is_file()))


def committed_files(root: Path = ROOT) -> tuple[str, ...]:
    """The committed artifact files under data/ (relative to data/): core.artifacts.iter_files's rule,
    ``*.json`` outside schema/ and quarantine/, applied to the committed files."""
    from core.artifacts import NOT_ARTIFACTS

    return tuple(
        r
        for r in tracked_files(root)
        if r.endswith(".json")
        and not r.rsplit("/", 1)[-1].startswith(".")
        and not set(r.split("/")[:-1]) & set(NOT_ARTIFACTS)
    )


def committed_paths(under: str = "runs") -> list[Path]:
    """The committed artifact files under data/<under>/ (``under`` ending in "-": a prefix of the folder
    name, e.g. "runs/lent-h100-"; "": all of them)."""
    prefix = under if not under or under.endswith(("/", "-")) else under + "/"
    base = committed_root()
    return [base / r for r in committed_files() if r.startswith(prefix)]


#: committed_runs()'s records, pickled once per process (the committed files do not change during a
#: test session): reading and validating them is seconds (~490 artifacts), unpickling a tenth of that
_RUNS_PICKLED: dict[tuple[Path, tuple[str, ...]], bytes] = {}


def committed_runs():
    """The committed run artifacts as records, oldest first (core.records.run.read_all's order).

    Read and validated once per process; every call returns records of its own (unpickled from the
    first call's), so a test that changes one changes nothing another test reads."""
    from core.records import run as record

    paths = committed_paths("runs")
    key = (committed_root(), tuple(str(p) for p in paths))
    if key in _RUNS_PICKLED:
        return pickle.loads(_RUNS_PICKLED[key])
    recs = [record.read(p) for p in paths]
    recs.sort(key=lambda r: (r.created, r.id))
    record.resolve_baselines(recs)
    with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):
        _RUNS_PICKLED[key] = pickle.dumps(recs, protocol=pickle.HIGHEST_PROTOCOL)
    return recs


def committed_data(
    dest: Path,
    *,
    artifacts: bool = True,
    only: list[str] | None = None,
    root: Path = ROOT,
) -> Path:
    """Copy the committed data folder to ``dest`` (made; returned): every committed input, and the
    committed artifacts (all of them; those of ``only``, paths relative to data/; or none when
    ``artifacts`` is false). Only committed files are copied: a path of ``only`` that git does not
    track is refused."""
    files = tracked_files(root)
    inputs = [r for r in files if r.split("/", 1)[0] not in ARTIFACT_DIRS]
    if only is not None:
        stray = sorted(set(only) - set(files))
        if stray:
            raise NoCommittedData(
                f"not committed under data/: {', '.join(stray[:5])}"
                + (" ..." if len(stray) > 5 else "")
            )
        chosen = list(only)
    else:
        chosen = (
            [r for r in files if r.split("/", 1)[0] in ARTIFACT_DIRS]
            if artifacts
            else []
        )
    base = committed_root(root)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in dict.fromkeys(inputs + chosen):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(base / rel, dest / rel)
    return dest


class UntrackedDataRead(RuntimeError):
    """A test opened an artifact under the live data/ folder that git does not track."""


class LiveDataGuard:
    """An audit hook (``sys.addaudithook``) refusing to open any artifact under ``live`` (a ``*.json``
    outside its schema/ folder, whatever the mode) that is not in ``tracked`` (paths relative to
    ``live``): reading a user's measurements, or writing beside them, fails loudly instead.
    ``paused()`` lets a test open them as opaque bytes (packing the working tree as it is)."""

    def __init__(self, live: Path, tracked: frozenset[str]) -> None:
        self.prefix = os.path.abspath(live) + os.sep
        self.allowed = frozenset(self.prefix + r.replace("/", os.sep) for r in tracked)
        self.schema = self.prefix + "schema" + os.sep
        self.paused_ = False

    def __call__(self, event: str, args: tuple) -> None:
        if event != "open" or self.paused_:
            return
        try:
            path = args[0]
            if isinstance(path, int):
                return
            path = os.path.abspath(os.fsdecode(path))
        except Exception:
            return
        if (
            path.startswith(self.prefix)
            and path.endswith(".json")
            and path not in self.allowed
            and not path.startswith(self.schema)
        ):
            raise UntrackedDataRead(
                f"a test opened {path}, which git does not track: tests read committed data only "
                "(ALMANAC_DATA is the committed copy; tests/conftest.py, tests/support/committed.py)"
            )

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        was, self.paused_ = self.paused_, True
        try:
            yield
        finally:
            self.paused_ = was
