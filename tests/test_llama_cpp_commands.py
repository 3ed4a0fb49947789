"""The command lines that reproduce a llama_cpp run (runtime/backends/llama_cpp/commands.py), and the
Optimization page printing what the site's composition root hands it (docs/macros.py): the backend
knows its flags and defaults, the page builder never imports it."""

from __future__ import annotations

import html

from core.records.run import RunRecord
from pipelines import optimization as opt
from pipelines.site import optimization as page
from runtime import backends
from runtime.backends.llama_cpp import commands
from runtime.backends.llama_cpp.config import LlamaCppSettings
from tests.conftest import ROOT
from tests.support.committed import committed_runs


def _doc(
    requested: dict,
    test: dict | None = None,
    effective: dict | None = None,
    arch: str = "qwen3moe",
    backend: str = "llama_cpp",
) -> RunRecord:
    return RunRecord(
        {
            "backend": backend,
            "settings": {
                "requested": {
                    **LlamaCppSettings().model_dump(mode="json"),
                    **requested,
                },
                "effective": effective or {},
                "swept": {},
            },
            "model": {"file_name": "m.gguf", "gguf": {"architecture": arch}},
            "test": test or {"kind": "generate", "name": "edit"},
        }
    )


def test_reproduce_flags_and_arguments():
    r = commands.command_lines(
        _doc(
            {
                "n_threads": 4,
                "n_expert_used": 4,
                "flash_attn": "on",
                "type_k": "q8_0",
                "type_v": "q8_0",
            }
        )
    )
    assert r["server"] == (
        "llama-server -m m.gguf -t 4 -fa on -ctk q8_0 -ctv q8_0 "
        "--override-kv qwen3moe.expert_used_count=int:4"
    )
    assert 'kv_overrides={"qwen3moe.expert_used_count": 4}' in r["python"]
    assert (
        "type_k=llama_cpp.GGML_TYPE_Q8_0" in r["python"]
        and "flash_attn=True" in r["python"]
    )
    assert "bench" not in r and r["notes"] == ""  # no rate test; flash attention set
    r = commands.command_lines(
        _doc(
            {"speculative": "prompt_lookup", "draft_max": 8, "lookup_ngram_max": 3},
            arch="gemma3",
        )
    )
    assert r["server"].endswith(
        "--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8"
    )
    assert (
        "draft_model=LlamaPromptLookupDecoding(max_ngram_size=3, num_pred_tokens=8)"
        in r["python"]
    )
    assert "ngram-simple matches n-grams of exactly N tokens" in r["notes"]
    r = commands.command_lines(
        _doc(
            {"speculative": "draft_model", "draft_model": "small", "draft_max": 5},
            effective={"draft_model_file": "small.gguf", "kv_overrides": {}},
            arch="gemma3",
        )
    )
    assert (
        r["server"].endswith("-md small.gguf --spec-draft-n-max 5")
        and "--override-kv" not in r["server"]
    )
    assert r["python"].endswith(
        "draft_model=ModelDraft(Llama('small.gguf'), num_pred_tokens=5))"
    )
    r = commands.command_lines(
        _doc(
            {"n_threads": 2},
            test={
                "kind": "rate",
                "name": "tg64@d512",
                "n_prompt": 0,
                "n_gen": 64,
                "n_depth": 512,
                "repetitions": 3,
            },
            arch="gemma3",
        )
    )
    assert r["bench"] == "llama-bench -m m.gguf -n 64 -d 512 -r 3 -t 2"


def test_a_flag_at_the_backends_default_is_left_out():
    """The defaults are LlamaCppSettings' own (no copy anywhere): a run at every default prints the
    model alone; a setting off its default prints its flag and its argument."""
    r = commands.command_lines(_doc({}))
    assert r["server"] == "llama-server -m m.gguf"
    assert r["python"] == "Llama(model_path='m.gguf')"
    assert r["notes"].startswith("flash attention 'auto' (llama.cpp's default)")
    defaults = LlamaCppSettings()
    r = commands.command_lines(
        _doc({"n_batch": defaults.n_batch // 2, "n_ubatch": defaults.n_ubatch})
    )
    assert r["server"] == f"llama-server -m m.gguf -b {defaults.n_batch // 2}"
    assert r["python"] == f"Llama(model_path='m.gguf', n_batch={defaults.n_batch // 2})"


def test_kv_overrides_quote_their_types():
    r = commands.command_lines(
        _doc({"kv_overrides": {"a.flag": True, "a.scale": 0.5, "a.name": "x y"}})
    )
    assert r["server"] == (
        "llama-server -m m.gguf --override-kv a.flag=bool:true "
        "--override-kv 'a.name=str:x y' --override-kv a.scale=float:0.5"
    )


def test_only_a_backend_that_has_command_lines_prints_them():
    assert backends.command_lines(_doc({}))["server"] == "llama-server -m m.gguf"
    assert backends.command_lines(_doc({}, backend="openai_http")) is None
    assert backends.command_lines(_doc({}, backend="no-such-backend")) is None


def test_the_page_prints_what_it_is_handed():
    # the committed sweeps (the fixtures' have no winning point: nothing to reproduce)
    sweeps = opt.sweeps(committed_runs())
    md = page.best_table(sweeps, [], backends.command_lines)
    assert "### Reproducing settings" in md
    assert "# llama.cpp\nllama-server -m " in html.unescape(
        md
    )  # escaped for HTML, as any artifact text
    # a backend without command lines (or none handed) prints none, and the table is the same
    assert "### Reproducing settings" not in page.best_table(sweeps, [], lambda r: None)
    assert page.best_table(sweeps, []) == md.split("\n\n### Reproducing settings")[0]


def test_the_site_hands_the_backends_command_lines():
    import importlib.util

    spec = importlib.util.spec_from_file_location("macros", ROOT / "docs" / "macros.py")
    assert spec and spec.loader
    macros = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(macros)

    class Env:
        variables: dict = {}

        def macro(self, fn, name):
            pass

    before = page.handed()
    try:
        macros.define_env(Env())
        assert page.handed() is backends.command_lines
    finally:
        page.hand(before)
