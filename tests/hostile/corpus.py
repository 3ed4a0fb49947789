"""The hostile input corpus: files an attacker or an unlucky user hands to ``invoke``.

Each case writes some files into a fresh data folder (a matrix, ``models.yaml``,
``hosts.yaml``, an artifact), runs one ``invoke`` command on it in a child process and
expects: a non-zero exit, one line on stderr matching ``expect`` (naming the file), no
traceback, nothing under data/ changed, within ``MAX_WALL_S`` seconds and ``MAX_RSS_BYTES``
of peak memory. ``run_case`` is shared by tests/test_hostile_corpus.py (which asserts all of
that) and benchmarks/hostile_corpus.py (which reports the figures).

A case may expect several lines (``invoke validate`` lists every bad file, then the count), or
none (an input that must simply work: a site that builds, with ``absent`` patterns that no built
page may contain). Storage faults run on a real tmpfs filled to the last byte, a read-only bind
mount, or as root without CAP_DAC_OVERRIDE (``mount``): they need root, and are skipped otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

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
    lines: int = 1  # lines expected on stderr (validate: every bad file, then the count; 0: must just work)
    absent: tuple[
        str, ...
    ] = ()  # regexes no page of the built site ({tmp}/site) may contain
    mount: str = ""  # "full" (a tmpfs filled up), "ro" (read-only bind mount), "noperm" (root without DAC override)
    # a hostile server's arguments (tests/hostile/round3_servers.py); None: no server
    server: tuple[str, ...] | None = None
    writes: str = ""  # a regex of files under data/ the command may write (lines -1: any lines, one says it)
    absent_csv: tuple[
        str, ...
    ] = ()  # regexes no CSV file of the built site may contain
    specials: tuple[
        tuple[str, str], ...
    ] = ()  # (path under the data folder, "fifo" or "->TARGET": a symlink)
    env: tuple[
        tuple[str, str], ...
    ] = ()  # extra environment for the child ({data}, {tmp} substituted)


def _matrix(body: str | bytes) -> dict[str, bytes]:
    return {"matrices/m.yaml": body if isinstance(body, bytes) else body.encode()}


BENCH = ["bench", "--matrix", "m"]
HOSTS = ["bench", "--host", "h", "--matrix", "m"]
GOOD_ARTIFACT = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/pp64--2ed2e379a91d1880-20261126T023419Z.json"


SITE = ["site.build", "--output", "{tmp}/site"]
VALIDATE = ["validate"]
# a live javascript: link, a script, an event handler: markup, not the escaped text of it
NONE_LIVE = (
    r'<a\s[^<>]*href="\s*javascript:',
    r"<script>alert",
    r"<[a-zA-Z][^<>]*\son[a-z]+\s*=",
)


def _golden(rel: str = GOOD_ARTIFACT) -> dict:
    return json.loads((RUN_FIXTURES.parent / rel).read_text())


def _mutated(fn: Callable[[dict], None], rel: str = GOOD_ARTIFACT) -> bytes:
    """A golden run artifact changed by ``fn``, as JSON text (NaN and infinities written as Python does)."""
    doc = _golden(rel)
    fn(doc)
    return json.dumps(doc, indent=1).encode()


def _set(path: str, value) -> Callable[[dict], None]:
    def fn(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for k in parents:
            node = node[k]
        node[last] = value

    return fn


def _raw(rel: str = GOOD_ARTIFACT) -> bytes:
    return (RUN_FIXTURES.parent / rel).read_bytes()


OTHER = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/pp64--688032f1cc1e51e0-20261126T023400Z.json"
TG = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/tg16--40fd4754f2e2ec5c-20261126T023404Z.json"
CHAT = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/chat-tiny--427a7b745acf4dd1-20261126T023449Z.json"
PP8 = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/pp8--40eefc23b5f5f100-20261126T023506Z.json"
TG2 = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/tg16--a8fc20456b5c5f48-20261126T023437Z.json"
FIVE_BAD = {
    GOOD_ARTIFACT: _mutated(_set("summary.tokens_per_second.mean", float("nan"))),
    OTHER: _mutated(_set("summary.tokens_per_second.max", float("inf")), OTHER),
    TG: _mutated(lambda d: d.pop("model"), TG),
    CHAT: _raw(CHAT).replace(b"{", b'{"id": "x",', 1),
    PP8: _mutated(_set("status", "weird"), PP8),
}
SAMPLE = ROOT / "tests" / "fixtures" / "llama-bench-sample.json"
IMPORT = [
    "import.llama-bench",
    str(SAMPLE),
    "--host-name",
    "bench-box",
    "--model",
    "{model}",
]


def _storage_cases() -> list[Case]:
    m = {"matrices/m.yaml": (BASE + "tests: [pp8]\n").encode()}
    return [
        Case("full-disk-import", m, IMPORT, "no space left", mount="full"),
        Case(
            "full-disk-bench-lock",
            m,
            BENCH,
            "cannot create the run lock: no space left",
            mount="full",
        ),
        Case(
            "read-only-bench-lock",
            m,
            BENCH,
            "run.lock: cannot create the run lock: the file system is read-only",
            mount="ro",
        ),
        Case("read-only-import", m, IMPORT, "the file system is read-only", mount="ro"),
        Case(
            "permission-denied-bench-lock",
            m,
            BENCH,
            "run.lock: cannot create the run lock: permission denied",
            mount="noperm",
        ),
        Case(
            "permission-denied-import", m, IMPORT, "permission denied", mount="noperm"
        ),
        Case(
            "lock-file-is-a-directory",
            {**m, "runs/{host}/.run.lock/x": b""},
            BENCH,
            "run.lock: cannot create the run lock: something else is in its place",
        ),
    ]


def _artifact_cases() -> list[Case]:
    """Issue 23's probes: non-finite numbers, unknown enumerated values, script through Markdown,
    duplicates, several bad files at once."""
    nan = {
        GOOD_ARTIFACT: _mutated(_set("summary.tokens_per_second.mean", float("nan")))
    }
    inf = {GOOD_ARTIFACT: _mutated(_set("summary.tokens_per_second.max", float("inf")))}
    big = {
        GOOD_ARTIFACT: _raw()
        .replace(b'"n": 3,', b'"n": 3, "max": 1e999,', 1)
        .replace(b'"max": 47', b'"maxx": 47', 1)
    }
    copy = {GOOD_ARTIFACT.replace("pp64--", "copy-of-pp64--"): _raw()}
    dup_key = {
        GOOD_ARTIFACT: _raw().replace(
            b"{", b'{"id": "5fb683a3eda9-20261126T040430.390Z",', 1
        )
    }
    q6k = {
        TG: _mutated(
            lambda d: (
                d["settings"]["effective"].update(type_k="q6_k", type_v="q6_k"),
                d["settings"]["requested"].update(type_k="q6_k", type_v="q6_k"),
            ),
            TG,
        )
    }
    link_test = {GOOD_ARTIFACT: _mutated(_set("test.name", "[t](javascript:alert(2))"))}
    link_model = {
        GOOD_ARTIFACT: _mutated(
            lambda d: (
                d["model"].update(name="[t](javascript:alert(2))"),
                d["build"].update(backend_version="<img src=x onerror=alert(1)>"),
                d["host"].update(name="**b** <script>alert(3)</script>"),
            )
        )
    }
    unknown_kind = {TG2: _mutated(_set("test.kind", "speculative-tree"), TG2)}
    unknown_metric = {
        TG2: _mutated(
            lambda d: d["summary"].update(
                {"joules_per_token": d["summary"]["tokens_per_second"]}
            ),
            TG2,
        )
    }
    odd_quant = {
        TG2: _mutated(
            lambda d: d["model"]["gguf"].update(
                quantization="IQ1_XXS_FUTURE", file_type=999
            ),
            TG2,
        )
    }
    return [
        Case(
            "validate-nan",
            nan,
            VALIDATE,
            "summary.tokens_per_second.mean: NaN is not a number",
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case(
            "site-nan", nan, SITE, "summary.tokens_per_second.mean: NaN", with_runs=True
        ),
        Case(
            "validate-infinity",
            inf,
            VALIDATE,
            "summary.tokens_per_second.max: Infinity",
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case(
            "site-infinity",
            inf,
            SITE,
            "summary.tokens_per_second.max: Infinity",
            with_runs=True,
        ),
        Case(
            "validate-1e999",
            big,
            VALIDATE,
            "summary.tokens_per_second.max: Infinity",
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case(
            "site-unknown-kv-cache-type", q6k, SITE, "", rc=0, lines=0, with_runs=True
        ),
        Case(
            "site-unknown-test-kind",
            unknown_kind,
            SITE,
            "",
            rc=0,
            lines=0,
            with_runs=True,
        ),
        Case(
            "site-unknown-metric",
            unknown_metric,
            SITE,
            "",
            rc=0,
            lines=0,
            with_runs=True,
        ),
        Case(
            "site-unknown-quantization",
            odd_quant,
            SITE,
            "",
            rc=0,
            lines=0,
            with_runs=True,
        ),
        Case(
            "validate-script-in-test-name",
            link_test,
            VALIDATE,
            "test.name: '[t](javascript:alert(2))' does not match",
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case("site-script-in-test-name", link_test, SITE, "test.name", with_runs=True),
        Case(
            "site-markdown-in-names",
            link_model,
            SITE,
            "",
            rc=0,
            lines=0,
            with_runs=True,
            absent=NONE_LIVE,
        ),
        Case(
            "validate-copied-artifact",
            copy,
            VALIDATE,
            "is also the id of",
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case("site-copied-artifact", copy, SITE, "is also the id of", with_runs=True),
        Case(
            "validate-duplicate-key",
            dup_key,
            VALIDATE,
            "id: key 'id' appears twice",
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case(
            "site-duplicate-key",
            dup_key,
            SITE,
            "key 'id' appears twice",
            with_runs=True,
        ),
        Case(
            "validate-five-bad-files",
            FIVE_BAD,
            VALIDATE,
            "chat-tiny--427a7b745acf4dd1",
            rc=1,
            lines=6,
            with_runs=True,
        ),
        Case(
            "site-five-bad-files",
            FIVE_BAD,
            SITE,
            "chat-tiny--427a7b745acf4dd1",
            lines=6,
            with_runs=True,
        ),
    ]


def _cases() -> list[Case]:
    laughs = billion_laughs()
    cases = [
        # -- YAML bombs and limits
        Case(
            "alias-bomb-in-used-value",
            _matrix(BASE + laughs + "tests: *a9\n"),
            BENCH,
            "alias",
        ),
        Case(
            "alias-bomb-in-settings",
            _matrix(BASE + laughs + "settings: {n_threads: *a9}\ntests: [pp8]\n"),
            BENCH,
            "alias",
        ),
        Case(
            "alias-bomb-in-models-yaml",
            {
                **_matrix(BASE + "tests: [pp8]\n"),
                "models.yaml": (laughs + "schema_version: 1\nmodels: *a9\n").encode(),
            },
            BENCH,
            "models.yaml",
        ),
        Case(
            "alias-bomb-in-hosts-yaml",
            {
                **_matrix(BASE + "tests: [pp8]\n"),
                "hosts.yaml": (
                    laughs + "schema_version: 1\nhosts: {h: *a9}\n"
                ).encode(),
            },
            HOSTS,
            "hosts.yaml",
        ),
        Case(
            "recursive-alias", _matrix(BASE + "tests: &t [pp8, *t]\n"), BENCH, "alias"
        ),
        Case(
            "sweep-9-to-the-9",
            _matrix(
                BASE
                + "tests: [pp8]\nsweep:\n"
                + "".join(
                    f"  {k}: [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
                    for k in (
                        "n_threads",
                        "n_threads_batch",
                        "n_batch",
                        "n_ubatch",
                        "n_ctx",
                        "n_gpu_layers",
                        "seed",
                        "top_k",
                        "main_gpu",
                    )
                )
            ),
            BENCH,
            "configurations",
        ),
        Case(
            "sweep-of-20001-values",
            _matrix(
                BASE
                + "tests: [pp8]\nsweep:\n  n_threads: ["
                + ", ".join(str(i % 8 + 1) for i in range(20001))
                + "]\n"
            ),
            BENCH,
            "configurations",
        ),
        Case(
            "deeply-nested",
            _matrix(BASE + "tests: " + "[" * 50000 + "]" * 50000 + "\n"),
            BENCH,
            "m.yaml",
        ),
        Case(
            "file-of-20-mib",
            _matrix(BASE + "description: '" + "x" * (20 << 20) + "'\ntests: [pp8]\n"),
            BENCH,
            "bytes",
        ),
        # -- encodings
        Case(
            "latin1-matrix",
            _matrix((BASE + "description: caf\xe9\ntests: [pp8]\n").encode("latin-1")),
            BENCH,
            "not UTF-8",
        ),
        Case(
            "utf16-matrix",
            _matrix((BASE + "tests: [pp8]\n").encode("utf-16")),
            BENCH,
            "not UTF-8",
        ),
        Case("binary-matrix", _matrix(bytes(range(256)) * 64), BENCH, "m.yaml"),
        Case(
            "latin1-models-yaml",
            {
                **_matrix(BASE + "tests: [pp8]\n"),
                "models.yaml": "schema_version: 1\nmodels: {m\xe9: {path: /x.gguf}}\n".encode(
                    "latin-1"
                ),
            },
            BENCH,
            "not UTF-8",
        ),
        Case(
            "latin1-hosts-yaml",
            {
                **_matrix(BASE + "tests: [pp8]\n"),
                "hosts.yaml": "schema_version: 1\nhosts: {h: {address: h\xf6st, user: u}}\n".encode(
                    "latin-1"
                ),
            },
            HOSTS,
            "not UTF-8",
        ),
        Case(
            "nul-bytes-in-matrix",
            _matrix(BASE.encode() + b"tests: [pp8\x00]\n"),
            BENCH,
            "m.yaml",
        ),
        # -- shapes and values
        Case("matrix-is-a-list", _matrix("- a\n- b\n"), BENCH, "mapping"),
        Case("matrix-is-empty", _matrix(""), BENCH, "empty"),
        Case("matrix-is-a-directory", {"matrices/m.yaml/x": b"x"}, BENCH, "directory"),
        Case(
            "long-line-in-error",
            _matrix(BASE + "tests: [pp8]\nwarmup: '" + "y" * 100_000 + "'\n"),
            BENCH,
            "warmup",
        ),
        Case(
            "multiline-value-in-error",
            _matrix(
                BASE
                + 'tests: [pp8]\nrepetitions: "1\\n2\\n3\\n'
                + "z\\n" * 1000
                + '"\n'
            ),
            BENCH,
            "repetitions",
        ),
        Case(
            "hidden-test-id",
            _matrix(BASE + "tests: [{kind: chat, id: .hidden}]\n"),
            BENCH,
            "not a valid id",
        ),
        Case(
            "path-test-id",
            _matrix(BASE + "tests: [{kind: chat, id: ../../../etc/passwd}]\n"),
            BENCH,
            "not a valid id",
        ),
        Case(
            "newline-test-id",
            _matrix(BASE + 'tests: [{kind: chat, id: "a\\nb"}]\n'),
            BENCH,
            "not a valid id",
        ),
        Case(
            "empty-test-id",
            _matrix(BASE + 'tests: [{kind: chat, id: ""}]\n'),
            BENCH,
            "not a valid id",
        ),
        Case(
            "huge-test-id",
            _matrix(BASE + "tests: [{kind: chat, id: " + "a" * 5000 + "}]\n"),
            BENCH,
            "not a valid id",
        ),
        Case(
            "include-cycle",
            {
                "matrices/m.yaml": b"include: m.yaml\n"
                + BASE.encode()
                + b"tests: [pp8]\n"
            },
            BENCH,
            "cycle",
        ),
        Case(
            "include-latin1",
            {
                "matrices/m.yaml": b"include: base.yaml\n"
                + BASE.encode()
                + b"tests: [pp8]\n",
                "matrices/base.yaml": "description: \xe9\n".encode("latin-1"),
            },
            BENCH,
            "not UTF-8",
        ),
        Case(
            "model-path-dev-zero",
            {
                **_matrix("schema_version: 1\nname: m\nmodels: [z]\ntests: [pp8]\n"),
                "models.yaml": b"schema_version: 1\nmodels: {z: {path: /dev/zero}}\n",
            },
            BENCH,
            "not found",
        ),
        Case(
            "model-not-gguf",
            {
                **_matrix("schema_version: 1\nname: m\nmodels: [t]\ntests: [pp8]\n"),
                "models.yaml": b"schema_version: 1\nmodels: {t: {path: {data}/notgguf.gguf}}\n",
                "notgguf.gguf": b"this is not a gguf file\n" * 100,
            },
            BENCH,
            "GGUF",
        ),
        Case(
            "gguf-header-absurd-counts",
            {
                **_matrix("schema_version: 1\nname: m\nmodels: [t]\ntests: [pp8]\n"),
                "models.yaml": b"schema_version: 1\nmodels: {t: {path: {data}/bomb.gguf}}\n",
                "bomb.gguf": b"GGUF"
                + (3).to_bytes(4, "little")
                + (2**62).to_bytes(8, "little")
                + (2**62).to_bytes(8, "little"),
            },
            BENCH,
            "GGUF",
        ),
        # -- artifacts met by the site build
        Case(
            "site-truncated-artifact",
            {GOOD_ARTIFACT: b'{"artifact": "run", "schema_version": 1, "id": "x'},
            ["site.build", "--output", "{tmp}/site"],
            "invalid JSON",
            with_runs=True,
        ),
        Case(
            "site-latin1-artifact",
            {GOOD_ARTIFACT: '{"artifact": "run", "note": "\xe9"}'.encode("latin-1")},
            ["site.build", "--output", "{tmp}/site"],
            "UTF-8",
            with_runs=True,
        ),
        Case(
            "site-artifact-is-a-list",
            {GOOD_ARTIFACT: b"[1, 2, 3]"},
            ["site.build", "--output", "{tmp}/site"],
            GOOD_ARTIFACT.rsplit("/", 1)[-1],
            with_runs=True,
        ),
    ]
    return cases + _artifact_cases() + _storage_cases()


def _registered() -> list[Case]:
    """Cases kept in modules of their own beside this one (issue 34's rounds: ``round3_files.py``,
    ``round3_servers.py``, ...): every ``tests/hostile/round*.py`` module's ``CASES``, in name order."""
    import importlib

    cases: list[Case] = []
    for mod in sorted(Path(__file__).parent.glob("round*.py")):
        cases += importlib.import_module(f"tests.hostile.{mod.stem}").CASES
    return cases


@dataclass
class Outcome:
    case: str
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_bytes: int
    changed: list[str] = field(default_factory=list)
    live: list[str] = field(
        default_factory=list
    )  # ``absent`` patterns found in the built site
    skipped: str = ""  # why the case could not run here (a storage case without root)

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def _snapshot(d: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in d.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[str(p.relative_to(d))] = (st.st_size, st.st_mtime_ns)
    return out


@lru_cache(maxsize=1)
def _here() -> dict[str, str]:
    """What a case may name: this host's id (its run lock's folder) and the embedded model's path."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from runtime.hosts.fingerprint import fingerprint; "
            "from runtime.models import registry as m; "
            "print(fingerprint()['id']); print(m.resolve(m.DEFAULT_MODEL).path)",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {"host": out[0], "model": out[1]}


def _subst(text: str, data: Path, tmp: Path) -> str:
    here = _here() if ("{host}" in text or "{model}" in text) else {}
    for k, v in {"data": str(data), "tmp": str(tmp), **here}.items():
        text = text.replace("{" + k + "}", v)
    return text


def prepare(case: Case, tmp: Path) -> Path:
    data = tmp / "data"
    (data / "matrices").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "data" / "models.yaml", data / "models.yaml")
    if case.with_runs:
        shutil.copytree(RUN_FIXTURES, data / "runs")
    for rel, content in case.files.items():
        p = data / _subst(rel, data, tmp)
        if p.exists() and p.is_dir():
            shutil.rmtree(p)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.replace(b"{data}", str(data).encode()))
    for rel, kind in case.specials:
        p = data / _subst(rel, data, tmp)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
        p.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(p)
        else:
            p.symlink_to(_subst(kind.removeprefix("->"), data, tmp))
    return data


def mount_skip(case: Case) -> str:
    """Why a storage case cannot run here ("" when it can)."""
    if not case.mount:
        return ""
    if os.geteuid() != 0:
        return (
            "needs root (a tmpfs, a read-only bind mount, or dropping CAP_DAC_OVERRIDE)"
        )
    need = "setpriv" if case.mount == "noperm" else "mount"
    return "" if shutil.which(need) else f"no {need} here"


def _fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to the last byte."""
    with open(folder / "ballast", "wb", buffering=0) as fh:
        for chunk in (b"\0" * 4096, b"\0"):
            try:
                while True:
                    fh.write(chunk)
            except OSError:
                pass


@contextlib.contextmanager
def _mounted(case: Case, data: Path, tmp: Path) -> Iterator[tuple[Path, list[str]]]:
    """The data folder the command sees, and a command prefix, for the case's storage fault."""
    if case.mount == "full":
        mnt = tmp / "full"
        mnt.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True
        )
        try:
            shutil.copytree(data, mnt, dirs_exist_ok=True)
            _fill(mnt)
            yield mnt, []
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=True)
    elif case.mount == "ro":
        mnt = tmp / "ro"
        mnt.mkdir()
        subprocess.run(["mount", "--bind", str(data), str(mnt)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(mnt)], check=True)
            yield mnt, []
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=True)
    elif case.mount == "noperm":
        (data / "runs").mkdir(exist_ok=True)
        dirs = [data, *(p for p in data.rglob("*") if p.is_dir())]
        for d in dirs:
            d.chmod(0o555)
        try:
            yield (
                data,
                [
                    "setpriv",
                    "--inh-caps=-dac_override,-dac_read_search",
                    "--bounding-set=-dac_override,-dac_read_search",
                ],
            )
        finally:
            for d in dirs:
                d.chmod(0o755)
    else:
        yield data, []


def live_markup(
    site: Path, patterns: tuple[str, ...], glob: str = "*.html"
) -> list[str]:
    """Where a built page (or CSV file) holds one of ``patterns`` (markup that artifact text must never become)."""
    found = []
    for page in sorted(site.rglob(glob)) if site.is_dir() else []:
        text = page.read_text(errors="replace")
        for pat in patterns:
            for m in re.finditer(pat, text):
                found.append(
                    f"{page.relative_to(site)}: {text[max(0, m.start() - 40) : m.end() + 40]!r}"
                )
    return found


def run_case(
    case: Case,
    tmp: Path,
    python: str = sys.executable,
    env_extra: Callable[[Path], dict[str, str]] | None = None,
) -> Outcome:
    if case.server is None:
        return _run_case(case, tmp, python, env_extra)
    from tests.hostile.round3_servers import serving

    with serving(case) as served:
        return _run_case(served, tmp, python, env_extra)


def _run_case(
    case: Case,
    tmp: Path,
    python: str = sys.executable,
    env_extra: Callable[[Path], dict[str, str]] | None = None,
) -> Outcome:
    """Run one case in ``tmp`` (a fresh folder): the child's exit, output, wall time, peak RSS
    (wait4: the child and the children it waited for) and which files under data/ changed."""
    skip = mount_skip(case)
    if skip:
        return Outcome(case.name, 0, "", "", 0.0, 0, skipped=skip)
    data = prepare(case, tmp)
    with _mounted(case, data, tmp) as (seen, prefix):
        before = _snapshot(seen)
        env = dict(
            os.environ,
            ALMANAC_DATA=str(seen),
            PYTHONPATH=str(ROOT),
            DISABLE_MKDOCS_2_WARNING="true",
            COLUMNS="200",
            NO_COLOR="1",
        )
        if env_extra:
            env.update(env_extra(tmp))
        env.update({k: _subst(v, seen, tmp) for k, v in case.env})
        args = [_subst(a, seen, tmp) for a in case.args]
        t0 = time.perf_counter()
        with open(tmp / "out.txt", "wb") as out, open(tmp / "err.txt", "wb") as err:
            proc = subprocess.Popen(
                [
                    *prefix,
                    python,
                    "-S",
                    "-c",
                    _SPAWN,
                    str(tmp / "maxrss.txt"),
                    python,
                    "-m",
                    "invoke",
                    *args,
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                _, status, rusage = _wait4(proc.pid, MAX_WALL_S * 2)
            except TimeoutError:
                os.killpg(proc.pid, 9)
                _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        after = _snapshot(seen)
    changed = sorted(
        k for k in set(before) | set(after) if before.get(k) != after.get(k)
    )
    return Outcome(
        case.name,
        os.waitstatus_to_exitcode(status),
        (tmp / "out.txt").read_text(errors="replace"),
        (tmp / "err.txt").read_text(errors="replace"),
        wall,
        _child_maxrss(tmp, rusage) * 1024,
        changed,
        (live_markup(tmp / "site", case.absent) if case.absent else [])
        + (
            live_markup(tmp / "site", case.absent_csv, "*.csv")
            if case.absent_csv
            else []
        ),
    )


def problems(case: Case, o: Outcome) -> list[str]:
    """Every rule the outcome broke (the test asserts none; the benchmark reports them)."""
    out = []
    if "Traceback" in o.stdout + o.stderr:
        out.append("traceback")
    if o.rc != case.rc:
        out.append(f"exit {o.rc}")
    if case.lines < 0:
        if case.expect not in o.stderr:
            out.append("no line says it")
    elif len(o.error_lines) != case.lines:
        out.append(f"{len(o.error_lines)} error lines")
    elif case.lines and (
        case.expect not in o.error_lines[0]
        or any(len(ln) > 400 for ln in o.error_lines)
    ):
        out.append("line does not say it")
    changed = [
        c for c in o.changed if not (case.writes and re.fullmatch(case.writes, c))
    ]
    if changed:
        out.append(f"changed {changed[:3]}")
    if o.live:
        out.append(f"live markup {o.live[:2]}")
    if o.wall_s >= MAX_WALL_S or o.peak_rss_bytes >= MAX_RSS_BYTES:
        out.append("over limits")
    return out


# The case's command runs as the child of a small interpreter, which reports that child's own peak
# RSS: a process forked from another keeps the other's high-water RSS in its ru_maxrss (fork shares
# the pages; exec keeps the mark), so measured from this test process a session grown past 1 GiB
# made every case "over limits". The shim exits as its child did, a signal included.
_SPAWN = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "_, status, ru = os.wait4(p.pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(ru.ru_maxrss))\n"
    "if os.WIFSIGNALED(status):\n"
    "    os.kill(os.getpid(), os.WTERMSIG(status))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def _child_maxrss(tmp: Path, rusage: Any) -> int:
    """The case command's own peak RSS in KiB, as its shim saw it (the shim's, killed first, else)."""
    try:
        return int((tmp / "maxrss.txt").read_text())
    except (OSError, ValueError):
        return int(rusage.ru_maxrss)


def _wait4(pid: int, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        r = os.wait4(pid, os.WNOHANG)
        if r[0] == pid:
            return r
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.02)


CASES = _cases() + _registered()  # last: a round module may use any name above
