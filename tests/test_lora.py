"""LoRA adapters: synthetic adapters written for a model, checked against it, attached for real
(llama.cpp in a child process), their cost and memory analysed from the artifacts."""

from __future__ import annotations

import json
import os

import pytest

from core.records.run import read
from runtime.models import lora, registry
from runtime.models.synth import make_shape, write_gguf
from tests.conftest import write_matrix


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two tiny llama files of different widths, and adapters written for the first."""
    d = tmp_path_factory.mktemp("lora")
    a = d / "tiny-a.gguf"
    b = d / "tiny-b.gguf"
    write_gguf("tiny-llama", "Q8_0", a, seed=0)
    write_gguf(make_shape("tiny-llama", n_embd=128, n_ff=384), "Q8_0", b, seed=0)
    out = {"dir": d, "a": a, "b": b, "adapters": []}
    for seed in range(2):
        spec = lora.LoraSynthSpec(
            base="tiny-a", rank=8, targets=["q", "v", "o", "down"], seed=seed
        )
        p = d / f"tiny-a-r8-{seed}.lora.gguf"
        lora.write_synthetic(spec, a, "0" * 64, p)
        out["adapters"].append(p)
    return out


def test_adapter_file_is_what_the_formula_predicts(tiny):
    from core.gguf import gguf_facts
    from pipelines import memory as mem

    facts = lora.adapter_facts(tiny["adapters"][0])
    assert (
        facts["general_type"] == "adapter"
        and facts["adapter_type"] == "lora"
        and facts["architecture"] == "llama"
    )
    assert (
        facts["rank"] == 8
        and facts["targets"] == ["q", "v", "o", "down"]
        and facts["n_layers"] == 4
    )
    assert facts["tensor_types"] == ["F16"] and facts["synthetic"] is True
    shape = mem.ModelShape.from_facts(gguf_facts(tiny["a"]), "tiny-a")
    # A (r x in) and B (out x r) per adapted projection and layer, 2 bytes a value: exactly the file's tensors
    assert mem.lora_bytes(shape, 8, ("q", "v", "o", "down")) == facts["tensor_bytes"]
    assert (
        mem.adapter_bytes(
            shape,
            [{"rank": 8, "targets": ["q", "v", "o", "down"], "tensor_types": ["F16"]}],
        )
        == facts["tensor_bytes"]
    )


def test_same_spec_same_bytes(tiny, tmp_path):
    spec = lora.LoraSynthSpec(
        base="tiny-a", rank=8, targets=["q", "v", "o", "down"], seed=0
    )
    p = tmp_path / "again.lora.gguf"
    lora.write_synthetic(spec, tiny["a"], "0" * 64, p)
    assert p.read_bytes() == tiny["adapters"][0].read_bytes()
    other = lora.LoraSynthSpec(
        base="tiny-a", rank=8, targets=["q", "v", "o", "down"], seed=5
    )
    assert lora.synthetic_path(other, "0" * 64, tmp_path) != lora.synthetic_path(
        spec, "0" * 64, tmp_path
    )


def test_fit_is_checked_naming_both(tiny):
    facts = lora.adapter_facts(tiny["adapters"][0])
    assert lora.mismatch("ad", facts, "tiny-a", tiny["a"]) is None
    msg = lora.mismatch("ad", facts, "tiny-b", tiny["b"])
    assert msg is not None and "\n" not in msg
    assert (
        "'ad'" in msg
        and "'tiny-b'" in msg
        and "n_embd 256" in msg
        and "n_embd 128" in msg
    )
    assert (
        "256→" in msg and "128→" in msg
    )  # the tensor's shape in the model and the one the adapter is built for
    wrong_arch = dict(facts, architecture="gemma3")
    assert "architecture gemma3 is not the model's llama" in lora.mismatch(
        "ad", wrong_arch, "tiny-a", tiny["a"]
    )
    not_lora = dict(facts, general_type="model")
    assert "not a LoRA adapter" in lora.mismatch("ad", not_lora, "tiny-a", tiny["a"])


def test_bad_spec_is_refused_with_the_field():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown target 'qq'"):
        lora.LoraSynthSpec(base="x", targets=["q", "qq"])
    with pytest.raises(ValidationError, match="exactly one of 'path' or 'synth'"):
        registry.AdapterEntry()


def test_unknown_adapter_name_suggests(data_env):
    from core.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"unknown LoRA adapter 'gemma3-270m-lora-r16-qvo-9' \(did you mean",
    ):
        registry.resolve_adapter("gemma3-270m-lora-r16-qvo-9")


def test_lora_buffer_lines_are_read_from_the_log():
    from runtime.backends.llama_cpp.backend import LlamaCppBackend

    log = (
        "llama_adapter_lora_init_impl: CPU_Mapped LoRA buffer size =     1.41 MiB\n"
        "llama_adapter_lora_init_impl:        CPU LoRA buffer size =     0.91 MiB\n"
    )
    assert LlamaCppBackend.log_facts(log)["lora_buffer_mib"] == [1.41, 0.91]


def test_settings_without_adapters_keep_their_key():
    """The adapter settings, at their defaults, are left out of what a run records (and of its key):
    adding them did not make every configuration measured before a new one."""
    from runtime.backends.llama_cpp.config import LlamaCppSettings

    s = LlamaCppSettings()
    assert "lora_adapters" not in s.recorded() and "lora_scale" not in s.recorded()
    with_one = LlamaCppSettings(lora_adapters=["x"])
    assert (
        with_one.recorded()["lora_adapters"] == ["x"]
        and "lora_scale" not in with_one.recorded()
    )


@pytest.fixture(scope="module")
def measured(tiny, tmp_path_factory):
    """A real matrix: the tiny model with 0, 1 and 2 adapters, and an adapter on the wrong model."""
    from runtime.execution import runner

    d = tmp_path_factory.mktemp("lora-data")
    (d / "matrices").mkdir()
    reg = {
        "schema_version": 1,
        "models": {
            "tiny-a": {"path": str(tiny["a"])},
            "tiny-b": {"path": str(tiny["b"])},
        },
        "adapters": {
            f"ad-{i}": {"path": str(p)} for i, p in enumerate(tiny["adapters"])
        },
    }
    (d / "models.yaml").write_text(json.dumps(reg))
    write_matrix(
        d,
        "lora-t",
        """
schema_version: 1
name: lora-t
models: [tiny-a]
repetitions: 3
precision: null
timeout_s: 300
tests: [pp32, tg8]
sweeps:
  - name: count
    sweep: {lora_adapters: [[], [ad-0], [ad-0, ad-1]]}
    baseline: {lora_adapters: []}
  - name: wrong
    models: [tiny-b]
    settings: {lora_adapters: [ad-0]}
    tests: [tg8]
""",
    )
    old = os.environ.get("ALMANAC_DATA")
    os.environ["ALMANAC_DATA"] = str(d)
    try:
        report = runner.run_matrix("lora-t")
        docs = [read(p) for p in report.measured + report.failed]
        again = runner.run_matrix("lora-t")
    finally:
        if old is None:
            os.environ.pop("ALMANAC_DATA", None)
        else:
            os.environ["ALMANAC_DATA"] = old
    return {"docs": docs, "report": report, "again": again, "data": d}


@pytest.mark.model
def test_adapters_attach_and_are_recorded(measured):
    docs = measured["docs"]
    two = [r for r in docs if r.ok and len(r.lora_requested) == 2]
    assert len(two) == 2  # pp32 and tg8
    for r in two:
        assert [a["name"] for a in r.lora_adapters] == ["ad-0", "ad-1"]
        assert all(a["rank"] == 8 and a["load_time_s"] > 0 for a in r.lora_adapters)
        # llama.cpp's own buffers hold the adapters' tensors: the files' tensor bytes (to its 0.01 MiB rounding)
        tensor = sum(a["tensor_bytes"] for a in r.lora_adapters)
        assert abs(sum(r.lora_buffer_mib) * 2**20 - tensor) <= 0.01 * 2**20 * len(
            r.lora_buffer_mib
        )
        assert r.lora.count == 2 and r.lora.rss_growth_bytes is not None
    none = [r for r in docs if r.ok and not r.lora_requested]
    assert none and all("lora_adapters" not in r.requested and not r.lora for r in none)


@pytest.mark.model
def test_mismatched_adapter_is_a_failed_point_naming_both(measured):
    failed = [r for r in measured["docs"] if not r.ok]
    assert len(failed) == 1
    err = failed[0].error
    assert err["kind"] == "incompatible" and "traceback" not in err
    assert (
        "'ad-0'" in err["message"]
        and "'tiny-b'" in err["message"]
        and "n_embd 128" in err["message"]
    )
    assert len(measured["report"].measured) == 6


@pytest.mark.model
def test_second_run_measures_nothing(measured):
    assert not measured["again"].measured and len(measured["again"].skipped) == 7


@pytest.mark.model
def test_adapter_table_from_the_artifacts(measured):
    from pipelines import adapters as ad
    from pipelines.site import tracks

    series = ad.adapter_series(measured["docs"])
    assert {(s.stage, s.test) for s in series} == {
        ("prefill", "pp32"),
        ("decode", "tg8"),
    }
    for s in series:
        assert [p.count for p in s.points] == [0, 1, 2]
        assert s.points[0].comparison is None and s.points[2].comparison["verdict"] in (
            "win",
            "loss",
            "within noise",
        )
        assert s.points[2].predicted_bytes == 2 * s.points[1].predicted_bytes > 0
        f = s.fit
        assert f is not None and f["n"] == 3 and f["slope_ci95"][0] is not None
    rows = ad.memory_rows(series)
    assert [r["count"] for r in rows] == [1, 2]
    # the formula is the files' tensor bytes; llama.cpp's buffers agree to its 0.01 MiB rounding per line
    for r in rows:
        assert r["predicted"] == r["file_bytes"]
        assert abs(r["predicted"] - r["buffer"]) <= 0.005 * 2**20 * 2 * r["count"]
    md = "\n".join(tracks.adapters_section(measured["docs"]))
    assert (
        "Adapter table" in md
        and "Cost per adapter" in md
        and "do not fit their model" in md
    )
    assert "tiny-b" in md
    assert "predicted against measured" in tracks.adapter_memory_section(
        measured["docs"]
    )
