"""The reference workload (data/matrices/reference.yaml): one matrix every host runs, small
enough for a 2-core CPU, big enough to mean something on a GPU, run by `invoke all`, and
its committed rows shared by the CPU host and the lent H100."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from core.records import run as record
from runtime.execution import matrix
from runtime.models import registry as models
from runtime.models import synth
from tests.support.committed import committed_runs

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "data" / "matrices" / "reference.yaml"

# What may legitimately differ between two hosts' rows of the same reference configuration:
# the effective settings that follow the hardware (threads = physical cores, the layers a
# GPU build really offloads, what flash attention "auto" resolved to on that device, and
# whether the CPU library may use its extra buffer types: runtime.backends.llama_cpp.lib_policy turns them off
# where llama.cpp has AMX compiled in).
HOST_DEPENDENT = {
    "n_threads",
    "n_threads_batch",
    "n_gpu_layers",
    "flash_attn",
    "use_extra_bufts",
    "use_extra_bufts_reason",
}


def test_reference_matrix_validates_and_names_the_embedded_and_synthetic_models():
    m = matrix.load(REFERENCE)
    assert m.name == "reference" and m.spec.backend == "llama_cpp"
    cfgs = m.configurations()
    assert {c.model for c in cfgs} == {models.DEFAULT_MODEL, "synthetic-llama-1b-q8_0"}
    assert sorted((c.model, c.test.name) for c in cfgs) == sorted(
        (mm, t)
        for mm in (models.DEFAULT_MODEL, "synthetic-llama-1b-q8_0")
        for t in ("pp512", "tg128")
    )
    assert all(c.test.warmup for c in cfgs)  # llama-bench's warm-up
    # the synthetic 1B repeats to ±5% within 30 s a test: the whole matrix in under 3 minutes on 2 cores
    # (benchmarks/reference_time.py); the embedded model's rows are the default matrix's
    synth_prec = {
        c.test.precision.model_dump_json()
        for c in cfgs
        if c.model != models.DEFAULT_MODEL
    }
    assert len(synth_prec) == 1
    p = next(c.test.precision for c in cfgs if c.model != models.DEFAULT_MODEL)
    assert (p.target, p.min_repetitions, p.max_time_s) == (0.05, 3, 30.0)
    # llama.cpp's defaults, the same request on every host: all layers on a GPU where there is one
    s = cfgs[0].settings
    assert m.spec.settings == {} and s.n_gpu_layers == -1 and s.flash_attn == "auto"
    assert (s.n_batch, s.n_ubatch, s.type_k, s.type_v, s.n_threads) == (
        2048,
        512,
        "f16",
        "f16",
        None,
    )


def test_reference_synthetic_shapes_are_small_enough_for_a_cpu_and_big_enough_for_a_gpu():
    reg = models.load_registry(ROOT / "data" / "models.yaml")
    for name in ("synthetic-llama-1b-q8_0",):
        spec = reg.models[name].synth
        assert spec is not None and spec.seed == 0 and not spec.set, (
            name
        )  # same recipe -> same bytes everywhere
        shape = synth.get_shape(spec.shape)
        assert 0.5e9 < shape.n_params() < 1.5e9, (name, shape.n_params())
        size = shape.file_size(synth.normalize_quant(spec.quant))
        assert size < 1.2e9, (
            name,
            size,
        )  # generated in seconds, runs in a few minutes on 2 cores


def test_reference_tests_are_the_default_matrix_tests():
    """The embedded model's reference rows are the default matrix's rows: same test
    definitions, same settings, so `invoke all` measures them once."""
    default = {c.test.name: c for c in matrix.load("default").configurations()}
    for c in matrix.load(REFERENCE).configurations():
        if c.model == models.DEFAULT_MODEL:
            d = default[c.test.name]
            assert c.test.to_dict() == d.test.to_dict()
            assert c.settings.model_dump(mode="json") == d.settings.model_dump(
                mode="json"
            )


def test_invoke_all_runs_default_then_reference(monkeypatch):
    from almanac_tasks import workflow

    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(workflow, "fetch", lambda c: calls.append(("fetch", "")))
    monkeypatch.setattr(
        workflow, "bench", lambda c, matrix: calls.append(("bench", matrix))
    )
    monkeypatch.setattr(workflow, "validate", lambda c: calls.append(("validate", "")))
    monkeypatch.setattr(
        workflow,
        "build_site",
        lambda c, output, if_changed=False: calls.append(("build", "")),
    )
    monkeypatch.setattr(
        workflow, "_where_this_host_stands", lambda: calls.append(("stands", ""))
    )
    monkeypatch.setattr(
        workflow, "_ensure_noise", lambda c: calls.append(("noise", ""))
    )
    monkeypatch.setattr(
        workflow, "_ensure_bandwidth", lambda c: calls.append(("bandwidth", ""))
    )
    workflow.all_.body(None)
    assert calls == [
        ("fetch", ""),
        ("bench", "default"),
        ("bench", "reference"),
        ("noise", ""),
        ("bandwidth", ""),
        ("validate", ""),
        ("build", ""),
        ("stands", ""),
    ]
    calls.clear()
    workflow.all_.body(None, matrix="reference")
    assert [c for c in calls if c[0] == "bench"] == [("bench", "reference")]


def _reference_rows() -> dict[tuple, dict[str, record.RunRecord]]:
    """The committed reference rows (tests.support.committed: not what a user's own `invoke all`
    added to data/), by (model, test) and host."""
    rows: dict[tuple, dict[str, record.RunRecord]] = defaultdict(dict)
    for r in record.latest_per_key(committed_runs()):
        if r.matrix_name == "reference" and r.ok:
            rows[(r.model_name, r.test_name)][r.host_id] = r
    return rows


def test_committed_reference_rows_are_shared_by_the_cpu_host_and_the_h100():
    rows = _reference_rows()
    synthetic = {k: v for k, v in rows.items() if k[0].startswith("synthetic-")}
    assert {
        (m, t)
        for m in ("synthetic-llama-1b-q4_0", "synthetic-llama-1b-q8_0")
        for t in ("pp512", "tg128")
    } <= set(synthetic)
    for (model, test), by_host in synthetic.items():
        gpu = [r for r in by_host.values() if r.gpu_names]
        cpu = [r for r in by_host.values() if not r.gpu_names]
        assert gpu and cpu, (model, test, sorted(by_host))
        for a in gpu:
            for b in cpu:
                # the same work (model identity, the test's work parameters, backend class), whatever
                # method measured each and whatever the host-dependent settings were
                assert a.work_key == b.work_key and a.model_sha256 == b.model_sha256
                assert (
                    a.backend == b.backend
                    and a.requested_explicit == b.requested_explicit
                )
                differ = {
                    k
                    for k in set(a.effective) | set(b.effective)
                    if a.effective.get(k) != b.effective.get(k)
                }
                assert differ <= HOST_DEPENDENT, (model, test, differ - HOST_DEPENDENT)
                # ... and what differs is recorded: every layer on the H100, none on the CPU build
                assert a.effective["n_gpu_layers"] == a.reported["n_layers_total"] > 0
                assert b.effective["n_gpu_layers"] == 0


def test_todays_reference_configurations_are_the_committed_rows_work():
    """What the reference matrix asks today (precision block, extra_bufts ...) is the work the
    committed hosts measured: a fresh host's rows land beside theirs."""
    rows = (
        _reference_rows()
    )  # read once (was once per configuration: the same rows each time)
    committed = {r.work_key for by_host in rows.values() for r in by_host.values()}
    reg = models.load_registry(ROOT / "data" / "models.yaml")
    for c in matrix.load(REFERENCE).configurations():
        committed_row = next(
            r
            for by_host in rows.values()
            for r in by_host.values()
            if r.model_name == c.model and r.test_name == c.test.name
        )
        test = c.test.to_dict()
        assert (
            test != committed_row.test
        )  # another method (a precision target, not -r 5) ...
        work_test = {
            k: v
            for k, v in test.items()
            if k not in c.test.METHOD_FIELDS | c.test.LABEL_FIELDS
        }
        assert work_test == committed_row.work["test"]  # ... the same work
        assert reg.models[c.model] is not None and committed_row.work_key in committed


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "data" / "matrices").glob("serving*.yaml")),
    ids=lambda p: p.stem,
)
def test_serving_matrices_validate(path):
    assert matrix.load(path).configurations()
