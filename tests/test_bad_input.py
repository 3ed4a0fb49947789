"""Bad input: one line naming the file and the field, exit != 0, no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core.errors import ConfigError
from runtime.execution import matrix
from tests.conftest import ROOT, tree_snapshot, write_matrix

BASE = "schema_version: 1\nname: m\nmodels: [gemma3-270m-q4_k_m]\n"

CASES = {
    "malformed-yaml": (BASE + "tests: [pp8\n", r"malformed YAML: line \d+"),
    "unknown-setting": (
        BASE + "settings: {n_treads: 2}\ntests: [pp8]\n",
        r"settings: n_treads: unknown setting 'n_treads' \(did you mean 'n_threads'\?\)",
    ),
    "negative-reps": (
        BASE + "repetitions: -3\ntests: [pp8]\n",
        r"repetitions: Input should be greater than or equal to 1",
    ),
    "bad-test": (BASE + "tests: [pp8x]\n", r"tests\[0\]: 'pp8x' is not a rate test"),
    "unknown-kind": (
        BASE + "tests: [{kind: chatt}]\n",
        r"tests\[0\].kind: unknown test kind 'chatt' \(did you mean 'chat'\?\)",
    ),
    "unknown-top": (
        BASE + "tests: [pp8]\nrepetition: 3\n",
        r"repetition: unknown setting 'repetition' \(did you mean 'repetitions'\?\)",
    ),
    "bad-kv-type": (
        BASE + "settings: {type_k: q3_x}\ntests: [pp8]\n",
        r"settings: type_k: unknown KV cache type 'q3_x'",
    ),
    "unknown-backend": (
        BASE + "backend: llamacpp\ntests: [pp8]\n",
        r"backend: unknown backend 'llamacpp' \(did you mean 'llama_cpp'\?\)",
    ),
    "empty-sweep": (
        BASE + "sweep: {n_threads: []}\ntests: [pp8]\n",
        r"sweep: Value error, sweep of 'n_threads' has no values|sweep of 'n_threads' has no values",
    ),
    "missing-model-path": (
        "schema_version: 1\nname: m\nmodels: [/nonexistent/model.gguf]\ntests: [pp8]\n",
        r"models.yaml: models./nonexistent/model.gguf.path: /nonexistent/model.gguf: model file not found",
    ),
    "unknown-model": (
        "schema_version: 1\nname: m\nmodels: [gemma3-270m]\ntests: [pp8]\n",
        r"unknown model 'gemma3-270m' \(did you mean 'gemma3-270m-q[0-9a-z_]+'\?\)",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bench_refuses_bad_matrix(case, data_env):
    body, pattern = CASES[case]
    write_matrix(data_env, "m", body)
    before = tree_snapshot(data_env)
    env = dict(os.environ, ALMANAC_DATA=str(data_env))
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "m"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "matrices/m.yaml" in lines[0] or "models.yaml" in lines[0]
    import re

    assert re.search(pattern, lines[0]), lines[0]
    assert tree_snapshot(data_env) == before  # nothing written or changed
    assert not (data_env / "runs").exists()


def test_include_merges_base(data_env):
    write_matrix(
        data_env,
        "base",
        BASE + "repetitions: 2\nsettings: {n_threads: 1, n_batch: 256}\ntests: [pp8]\n",
    )
    write_matrix(
        data_env,
        "child",
        (
            "include: base.yaml\nname: child\nsettings: {n_batch: 128}\nsweep: "
            "{flash_attn: ['on', 'off']}\ntests: [tg4, pp8]\n"
        ),
    )
    m = matrix.load("child")
    cfgs = m.configurations()
    assert m.name == "child" and len(cfgs) == 4
    assert {c.settings.n_batch for c in cfgs} == {128} and {
        c.settings.n_threads for c in cfgs
    } == {1}
    assert {c.settings.flash_attn for c in cfgs} == {"on", "off"}
    assert all(c.test.repetitions == 2 for c in cfgs)


def test_include_cycle_refused(data_env):
    write_matrix(data_env, "a", "include: b.yaml\n" + BASE + "tests: [pp8]\n")
    write_matrix(data_env, "b", "include: a.yaml\n" + BASE + "tests: [pp8]\n")
    with pytest.raises(ConfigError, match="include cycle"):
        matrix.load("a")


def test_unknown_matrix_name_suggests(data_env):
    write_matrix(data_env, "default", BASE + "tests: [pp8]\n")
    with pytest.raises(
        ConfigError, match=r"no matrix named 'defualt' \(did you mean 'default'\?\)"
    ):
        matrix.load("defualt")


def test_rate_test_names_round_trip():
    from core.kinds.rate import RateTest

    for name in ["pp512", "tg128", "pp512+tg128", "tg128@d2048", "pp512@d512"]:
        assert RateTest.parse(name).name == name
