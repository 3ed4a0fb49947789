"""The hostile input corpus: files an attacker or an unlucky user hands to ``invoke``.

Each case writes some files into a fresh data folder (a matrix, ``models.yaml``,
``hosts.yaml``, an artifact), runs one ``invoke`` command on it in a child process and
expects: a non-zero exit, one line on stderr matching ``expect`` (naming the file), no
traceback, nothing under data/ changed, within ``MAX_WALL_S`` seconds and ``MAX_RSS_BYTES``
of peak memory. ``run_case`` is shared by tests/test_hostile_corpus.py (which asserts all of
that) and benchmarks/hostile_corpus.py (which reports the figures).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
MAX_WALL_S = 60.0
MAX_RSS_BYTES = 1 << 30
BASE = "schema_version: 1\nname: m\nmodels: [gemma3-270m-q4_k_m]\n"
RUN_FIXTURES = ROOT / "tests" / "fixtures" / "data" / "runs"


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Case:
    name: str
    files: dict[str, bytes]  # path under the data folder -> content
    args: list[str]  # invoke arguments
    expect: str  # a substring of the one error line
    rc: int = 2
    with_runs: bool = False  # copy the golden run artifacts in first (site cases)


def _matrix(body: str | bytes) -> dict[str, bytes]:
    return {"matrices/m.yaml": body if isinstance(body, bytes) else body.encode()}


BENCH = ["bench", "--matrix", "m"]
HOSTS = ["bench", "--host", "h", "--matrix", "m"]
GOOD_ARTIFACT = "runs/golden-host-94ba7631/gemma3-270m-q4-k-m/pp64--37c9f1c875596d65-20261126T023419Z.json"


def _cases() -> list[Case]:
    laughs = billion_laughs()
    cases = [
        # -- YAML bombs and limits
        Case("alias-bomb-in-used-value", _matrix(BASE + laughs + "tests: *a9\n"), BENCH, "alias"),
        Case("alias-bomb-in-settings", _matrix(BASE + laughs + "settings: {n_threads: *a9}\ntests: [pp8]\n"), BENCH, "alias"),
        Case("alias-bomb-in-models-yaml", {**_matrix(BASE + "tests: [pp8]\n"),
                                           "models.yaml": (laughs + "schema_version: 1\nmodels: *a9\n").encode()},
             BENCH, "models.yaml"),
        Case("alias-bomb-in-hosts-yaml", {**_matrix(BASE + "tests: [pp8]\n"),
                                          "hosts.yaml": (laughs + "schema_version: 1\nhosts: {h: *a9}\n").encode()},
             HOSTS, "hosts.yaml"),
        Case("recursive-alias", _matrix(BASE + "tests: &t [pp8, *t]\n"), BENCH, "alias"),
        Case("sweep-9-to-the-9", _matrix(BASE + "tests: [pp8]\nsweep:\n" + "".join(
            f"  {k}: [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for k in ("n_threads", "n_threads_batch", "n_batch", "n_ubatch",
                                                              "n_ctx", "n_gpu_layers", "seed", "top_k", "main_gpu"))),
             BENCH, "configurations"),
        Case("sweep-of-20001-values", _matrix(BASE + "tests: [pp8]\nsweep:\n  n_threads: ["
                                              + ", ".join(str(i % 8 + 1) for i in range(20001)) + "]\n"),
             BENCH, "configurations"),
        Case("deeply-nested", _matrix(BASE + "tests: " + "[" * 50000 + "]" * 50000 + "\n"), BENCH, "m.yaml"),
        Case("file-of-20-mib", _matrix(BASE + "description: '" + "x" * (20 << 20) + "'\ntests: [pp8]\n"), BENCH,
             "bytes"),
        # -- encodings
        Case("latin1-matrix", _matrix((BASE + "description: caf\xe9\ntests: [pp8]\n").encode("latin-1")), BENCH,
             "not UTF-8"),
        Case("utf16-matrix", _matrix((BASE + "tests: [pp8]\n").encode("utf-16")), BENCH, "not UTF-8"),
        Case("binary-matrix", _matrix(bytes(range(256)) * 64), BENCH, "m.yaml"),
        Case("latin1-models-yaml", {**_matrix(BASE + "tests: [pp8]\n"),
                                    "models.yaml": "schema_version: 1\nmodels: {m\xe9: {path: /x.gguf}}\n".encode("latin-1")},
             BENCH, "not UTF-8"),
        Case("latin1-hosts-yaml", {**_matrix(BASE + "tests: [pp8]\n"),
                                   "hosts.yaml": "schema_version: 1\nhosts: {h: {address: h\xf6st, user: u}}\n".encode("latin-1")},
             HOSTS, "not UTF-8"),
        Case("nul-bytes-in-matrix", _matrix(BASE.encode() + b"tests: [pp8\x00]\n"), BENCH, "m.yaml"),
        # -- shapes and values
        Case("matrix-is-a-list", _matrix("- a\n- b\n"), BENCH, "mapping"),
        Case("matrix-is-empty", _matrix(""), BENCH, "empty"),
        Case("matrix-is-a-directory", {"matrices/m.yaml/x": b"x"}, BENCH, "directory"),
        Case("long-line-in-error", _matrix(BASE + "tests: [pp8]\nwarmup: '" + "y" * 100_000 + "'\n"), BENCH, "warmup"),
        Case("multiline-value-in-error", _matrix(BASE + "tests: [pp8]\nrepetitions: \"1\\n2\\n3\\n" + "z\\n" * 1000 + "\"\n"),
             BENCH, "repetitions"),
        Case("hidden-test-id", _matrix(BASE + "tests: [{kind: chat, id: .hidden}]\n"), BENCH, "not a valid id"),
        Case("path-test-id", _matrix(BASE + "tests: [{kind: chat, id: ../../../etc/passwd}]\n"), BENCH, "not a valid id"),
        Case("newline-test-id", _matrix(BASE + "tests: [{kind: chat, id: \"a\\nb\"}]\n"), BENCH, "not a valid id"),
        Case("empty-test-id", _matrix(BASE + "tests: [{kind: chat, id: \"\"}]\n"), BENCH, "not a valid id"),
        Case("huge-test-id", _matrix(BASE + "tests: [{kind: chat, id: " + "a" * 5000 + "}]\n"), BENCH, "not a valid id"),
        Case("include-cycle", {"matrices/m.yaml": b"include: m.yaml\n" + BASE.encode() + b"tests: [pp8]\n"}, BENCH, "cycle"),
        Case("include-latin1", {"matrices/m.yaml": b"include: base.yaml\n" + BASE.encode() + b"tests: [pp8]\n",
                                "matrices/base.yaml": "description: \xe9\n".encode("latin-1")}, BENCH, "not UTF-8"),
        Case("model-path-dev-zero", {**_matrix("schema_version: 1\nname: m\nmodels: [z]\ntests: [pp8]\n"),
                                     "models.yaml": b"schema_version: 1\nmodels: {z: {path: /dev/zero}}\n"},
             BENCH, "not found"),
        Case("model-not-gguf", {**_matrix("schema_version: 1\nname: m\nmodels: [t]\ntests: [pp8]\n"),
                                "models.yaml": b"schema_version: 1\nmodels: {t: {path: {data}/notgguf.gguf}}\n",
                                "notgguf.gguf": b"this is not a gguf file\n" * 100}, BENCH, "GGUF"),
        Case("gguf-header-absurd-counts", {**_matrix("schema_version: 1\nname: m\nmodels: [t]\ntests: [pp8]\n"),
                                           "models.yaml": b"schema_version: 1\nmodels: {t: {path: {data}/bomb.gguf}}\n",
                                           "bomb.gguf": b"GGUF" + (3).to_bytes(4, "little")
                                           + (2**62).to_bytes(8, "little") + (2**62).to_bytes(8, "little")},
             BENCH, "GGUF"),
        # -- artifacts met by the site build
        Case("site-truncated-artifact", {GOOD_ARTIFACT: b'{"artifact": "run", "schema_version": 1, "id": "x'},
             ["site.build", "--output", "{tmp}/site"], "invalid JSON", with_runs=True),
        Case("site-latin1-artifact", {GOOD_ARTIFACT: '{"artifact": "run", "note": "\xe9"}'.encode("latin-1")},
             ["site.build", "--output", "{tmp}/site"], "UTF-8", with_runs=True),
        Case("site-artifact-is-a-list", {GOOD_ARTIFACT: b"[1, 2, 3]"}, ["site.build", "--output", "{tmp}/site"],
             GOOD_ARTIFACT.rsplit("/", 1)[-1], with_runs=True),
    ]
    return cases


CASES = _cases()


@dataclass
class Outcome:
    case: str
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_bytes: int
    changed: list[str] = field(default_factory=list)

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def _snapshot(d: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in d.rglob("*"):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(d))] = (st.st_size, st.st_mtime_ns)
    return out


def prepare(case: Case, tmp: Path) -> Path:
    data = tmp / "data"
    (data / "matrices").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "data" / "models.yaml", data / "models.yaml")
    if case.with_runs:
        shutil.copytree(RUN_FIXTURES, data / "runs")
    for rel, content in case.files.items():
        p = data / rel
        if p.exists() and p.is_dir():
            shutil.rmtree(p)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.replace(b"{data}", str(data).encode()))
    return data


def run_case(case: Case, tmp: Path, python: str = sys.executable,
             env_extra: Callable[[Path], dict[str, str]] | None = None) -> Outcome:
    """Run one case in ``tmp`` (a fresh folder): the child's exit, output, wall time, peak RSS
    (wait4: the child and the children it waited for) and which files under data/ changed."""
    data = prepare(case, tmp)
    before = _snapshot(data)
    env = dict(os.environ, ALMANAC_DATA=str(data), PYTHONPATH=str(ROOT), DISABLE_MKDOCS_2_WARNING="true",
               COLUMNS="200", NO_COLOR="1")
    if env_extra:
        env.update(env_extra(tmp))
    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    t0 = time.perf_counter()
    with open(tmp / "out.txt", "wb") as out, open(tmp / "err.txt", "wb") as err:
        proc = subprocess.Popen([python, "-m", "invoke", *args], cwd=ROOT, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            _, status, rusage = _wait4(proc.pid, MAX_WALL_S * 2)
        except TimeoutError:
            os.killpg(proc.pid, 9)
            _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    after = _snapshot(data)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return Outcome(case.name, os.waitstatus_to_exitcode(status), (tmp / "out.txt").read_text(errors="replace"),
                   (tmp / "err.txt").read_text(errors="replace"), wall, int(rusage.ru_maxrss) * 1024, changed)


def _wait4(pid: int, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        r = os.wait4(pid, os.WNOHANG)
        if r[0] == pid:
            return r
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.02)
