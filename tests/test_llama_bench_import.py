"""Import of llama-bench JSON as run artifacts (runtime/importers/llama_bench.py).

The fixture tests/fixtures/llama-bench-sample.json is real llama-bench output: built from
the llama.cpp vendored in llama-cpp-python 0.3.36 by benchmarks/fidelity.py, run on the
embedded model with ``-p 16 -n 4 -r 2 -o json``. No test here needs llama-bench built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import artifacts, stats
from core.errors import ModelError, UserError
from runtime.backends.llama_cpp.backend import VENDORED_LLAMA_CPP
from runtime.hosts import fingerprint as host
from runtime.importers import llama_bench as lb

from .conftest import ROOT, tree_snapshot

SAMPLE = ROOT / "tests" / "fixtures" / "llama-bench-sample.json"


def sample_records() -> list[dict]:
    return json.loads(SAMPLE.read_text())


def write_json(path: Path, records) -> Path:
    path.write_text(json.dumps(records, indent=2))
    return path


@pytest.fixture
def runs_root(data_env):
    return data_env / "runs"


@pytest.fixture
def local_sample(tmp_path, embedded_model):
    """The sample as if measured on this machine, its model file next to the JSON."""
    recs = sample_records()
    cpu = host.fingerprint()["cpu"]["model"]
    for r in recs:
        r["cpu_info"] = cpu
        r["model_filename"] = "model.gguf"  # relative: found beside the JSON file
    (tmp_path / "model.gguf").symlink_to(embedded_model.path)
    return write_json(tmp_path / "bench.json", recs)


# -- the real fixture ---------------------------------------------------------------------------
def test_fixture_is_real_llama_bench_output():
    recs = lb.read_records(SAMPLE)
    assert [(r.n_prompt, r.n_gen) for r in recs] == [(16, 0), (0, 4)]
    assert {r.build_commit for r in recs} == {
        VENDORED_LLAMA_CPP["0.3.36"]
    }  # named at build time (no git in the sdist)
    assert all(len(r.samples_ts) == 2 for r in recs)


def test_import_maps_fields_onto_valid_run_artifacts(runs_root, embedded_model):
    report = lb.import_file(
        SAMPLE, host_name="bench-box", model=embedded_model.path, root=runs_root
    )
    assert len(report.written) == 2 and not report.skipped
    raw = {(r["n_prompt"], r["n_gen"]): r for r in sample_records()}
    docs = {d["test"]["name"]: d for d in (artifacts.load(p) for p in report.written)}
    assert set(docs) == {"pp16", "tg4"}
    for doc in docs.values():
        rec = raw[(doc["test"]["n_prompt"], doc["test"]["n_gen"])]
        assert (
            doc["backend"] == "llama-bench"
            and doc["status"] == "ok"
            and doc["error"] is None
        )
        assert doc["model"]["sha256"] == embedded_model.sha256
        assert (
            doc["model"]["desc"] == rec["model_type"]
            and doc["model"]["n_params"] == rec["model_n_params"]
        )
        assert doc["samples"] == {"ns": rec["samples_ns"], "ts": rec["samples_ts"]}
        assert doc["summary"]["tokens_per_second"] == stats.summarize(rec["samples_ts"])
        # llama-bench prints samples_ts with 6 significant digits: its own mean agrees to that precision
        assert doc["summary"]["tokens_per_second"]["mean"] == pytest.approx(
            rec["avg_ts"], rel=1e-4
        )
        assert doc["summary"]["tokens_per_second"]["stddev"] == pytest.approx(
            rec["stddev_ts"], rel=1e-4
        )
        assert doc["test"]["repetitions"] == len(rec["samples_ts"])
        req = doc["settings"]["requested"]
        assert (
            req["n_threads"],
            req["n_batch"],
            req["n_ubatch"],
            req["type_k"],
            req["type_v"],
            req["n_gpu_layers"],
        ) == (
            rec["n_threads"],
            rec["n_batch"],
            rec["n_ubatch"],
            rec["type_k"],
            rec["type_v"],
            rec["n_gpu_layers"],
        )
        assert req["flash_attn"] == {-1: "auto", 0: "off", 1: "on"}[rec["flash_attn"]]
        assert (
            doc["settings"]["effective"]["poll"] == rec["poll"]
        )  # llama-bench-only fields kept as printed
        assert doc["build"]["llama_cpp_commit"] == rec["build_commit"]
        assert doc["created"].startswith(rec["test_time"].rstrip("Z"))
        # a host known only from the JSON: names, and nulls rather than guesses
        assert (
            doc["host"]["name"] == "bench-box"
            and doc["host"]["cpu"]["model"] == rec["cpu_info"]
        )
        assert (
            doc["host"]["memory_bytes"] is None
            and doc["host"]["cpu"]["physical_cores"] is None
        )
    assert docs["pp16"]["key"] != docs["tg4"]["key"]


def test_second_import_writes_nothing(runs_root, embedded_model):
    lb.import_file(
        SAMPLE, host_name="bench-box", model=embedded_model.path, root=runs_root
    )
    before = tree_snapshot(runs_root)
    again = lb.import_file(
        SAMPLE, host_name="bench-box", model=embedded_model.path, root=runs_root
    )
    assert not again.written and len(again.skipped) == 2
    assert tree_snapshot(runs_root) == before


def test_this_host_and_model_found_beside_the_json(
    local_sample, runs_root, embedded_model
):
    report = lb.import_file(local_sample, root=runs_root)
    doc = artifacts.load(report.written[0])
    here = host.fingerprint()
    assert (
        doc["host"]["id"] == here["id"]
        and doc["host"]["memory_bytes"] == here["memory_bytes"]
    )
    assert doc["model"]["sha256"] == embedded_model.sha256
    assert (
        doc["model"]["name"] == embedded_model.name
    )  # the registry's name, found by hash: sits beside our runs


def test_known_host_fingerprint_is_reused(runs_root, embedded_model, tmp_path):
    """A host already measured (e.g. remotely) keeps its full fingerprint for imported results."""
    first = lb.import_file(
        SAMPLE, host_name="bench-box", model=embedded_model.path, root=runs_root
    )
    for path in first.written:
        doc = artifacts.load(path)
        doc["host"]["memory_bytes"] = (
            64 << 30
        )  # as a full fingerprint of that host would have it
        artifacts.write(path, doc)
    recs = sample_records()
    for r in recs:
        r["n_threads"] = r["n_threads"] + 1  # another configuration on the same host
    other = lb.import_file(
        write_json(tmp_path / "t.json", recs),
        host_name="bench-box",
        model=embedded_model.path,
        root=runs_root,
    )
    assert artifacts.load(other.written[0])["host"]["memory_bytes"] == 64 << 30


def test_jsonl_output_is_read_like_json(tmp_path):
    recs = sample_records()
    p = tmp_path / "bench.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert [r.model_dump() for r in lb.read_records(p)] == [
        r.model_dump() for r in lb.read_records(SAMPLE)
    ]


def test_older_llama_bench_without_depth_and_bool_flash_attn(tmp_path):
    recs = sample_records()
    for r in recs:
        del r["n_depth"]
        r["flash_attn"] = False
    got = lb.read_records(write_json(tmp_path / "old.json", recs))
    assert got[0].n_depth == 0 and got[0].requested_settings()["flash_attn"] == "off"


# -- bad input: one line naming the file and the field, nothing written ---------------------------
def _mutate(fn):
    recs = sample_records()
    fn(recs)
    return recs


BAD = {
    "missing field": (
        lambda r: r[0].pop("samples_ts"),
        "[0]: samples_ts: required field is missing",
    ),
    "wrong type": (
        lambda r: r[0].update(n_prompt="16"),
        "[0]: n_prompt: Input should be a valid integer",
    ),
    "negative": (lambda r: r[1].update(n_gen=-4), "[1]: n_gen:"),
    "avg_ts not the samples' mean": (
        lambda r: r[0].update(avg_ts=r[0]["avg_ts"] * 2),
        "avg_ts",
    ),
    "samples_ts not tokens/ns": (
        lambda r: r[1]["samples_ts"].__setitem__(0, r[1]["samples_ts"][0] * 1.5),
        "samples_ts[0]",
    ),
    "sample counts differ": (
        lambda r: r[0]["samples_ns"].append(r[0]["samples_ns"][0]),
        "samples_ns has 3 values",
    ),
    "no test": (lambda r: r[0].update(n_prompt=0), "not a test"),
    "flash_attn out of range": (lambda r: r[0].update(flash_attn=7), "flash_attn"),
    "bad time": (lambda r: r[1].update(test_time="yesterday"), "[1]: test_time"),
    "not an object": (lambda r: r.append(3), "[2]: expected an object"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_record_names_file_and_field(case, tmp_path, runs_root):
    fn, expected = BAD[case]
    p = write_json(tmp_path / "bad.json", _mutate(fn))
    with pytest.raises(UserError) as exc:
        lb.import_file(p, host_name="bench-box", root=runs_root)
    msg = str(exc.value)
    assert msg.startswith(str(p)) and expected in msg and "\n" not in msg
    assert not runs_root.exists() or not any(runs_root.rglob("*.json"))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "invalid JSON at line 1"),
        ("[]", "no records"),
        ('{"a": 1', "unterminated"),
        ('"pp512"', "expected an array"),
    ],
)
def test_bad_file(text, expected, tmp_path, runs_root):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(UserError, match=expected):
        lb.import_file(p, host_name="bench-box", root=runs_root)


def test_interrupted_llama_bench_output_is_refused(tmp_path, runs_root):
    text = SAMPLE.read_text()
    p = tmp_path / "cut.json"
    p.write_text(
        text[: text.rindex("]")]
    )  # llama-bench killed before printing the footer
    with pytest.raises(UserError, match="unterminated"):
        lb.import_file(p, host_name="bench-box", root=runs_root)


def test_missing_model_file_is_refused_not_guessed(tmp_path, runs_root):
    recs = _mutate(
        lambda r: [x.update(model_filename="/nowhere/model.gguf") for x in r]
    )
    p = write_json(tmp_path / "b.json", recs)
    with pytest.raises(
        ModelError,
        match=r"\[0\]\.model_filename: model file '/nowhere/model.gguf' not found; pass --model",
    ):
        lb.import_file(p, host_name="bench-box", root=runs_root)
    assert not runs_root.exists()


def test_a_different_model_file_is_refused(tmp_path, runs_root):
    from runtime.models import synth

    tiny = tmp_path / "tiny.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", tiny)
    with pytest.raises(
        ModelError, match=r"\[0\]\.model_size: .*not the same model file"
    ):
        lb.import_file(SAMPLE, host_name="bench-box", model=str(tiny), root=runs_root)
    assert not runs_root.exists()


def test_other_cpu_without_host_name_is_refused(tmp_path, runs_root):
    p = write_json(
        tmp_path / "b.json",
        _mutate(lambda r: [x.update(cpu_info="Imaginary CPU 9000") for x in r]),
    )
    with pytest.raises(UserError, match="not this host's CPU .* pass --host-name"):
        lb.import_file(p, root=runs_root)


def test_two_hosts_in_one_file_are_refused(tmp_path, runs_root):
    p = write_json(
        tmp_path / "b.json", _mutate(lambda r: r[1].update(cpu_info="Other CPU"))
    )
    with pytest.raises(UserError, match=r"\[1\]\.cpu_info: CPU/GPU differ"):
        lb.import_file(p, host_name="bench-box", root=runs_root)


def test_one_bad_record_means_nothing_is_written(tmp_path, runs_root, embedded_model):
    """The good first record is not written when the second one is bad (validated before writing)."""
    recs = _mutate(lambda r: r[1].update(model_filename="/nowhere/other.gguf"))
    p = write_json(tmp_path / "b.json", recs)
    with pytest.raises(ModelError):
        lb.import_file(p, host_name="bench-box", root=runs_root)
    assert not runs_root.exists() or not any(runs_root.rglob("*.json"))


def test_task_prints_one_line_and_exits_2(tmp_path, data_env):
    p = write_json(tmp_path / "bad.json", _mutate(lambda r: r[0].pop("avg_ts")))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "import.llama-bench",
            str(p),
            "--host-name",
            "x",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "ALMANAC_DATA": str(data_env)},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {p}: [0]: avg_ts: required field is missing"
    assert not (data_env / "runs").exists()


def test_unregistered_model_is_named_by_its_file(tmp_path, runs_root):
    """A model outside the registry: hashed, checked against model_size, named after its file."""
    from runtime.models import registry as models
    from runtime.models import synth

    tiny = tmp_path / "tiny-q8.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", tiny)
    size = sum(models.gguf_facts(tiny)["tensor_bytes_by_type"].values())
    p = write_json(
        tmp_path / "b.json",
        _mutate(
            lambda r: [
                x.update(model_filename="tiny-q8.gguf", model_size=size) for x in r
            ]
        ),
    )
    doc = artifacts.load(
        lb.import_file(p, host_name="bench-box", root=runs_root).written[0]
    )
    assert doc["model"]["name"] == "tiny-q8" and doc["model"][
        "sha256"
    ] == models.sha256_file(tiny)
    assert doc["model"]["synthetic"] is True
