"""The GPU path: NVML fingerprint and peak VRAM, the GPU benchmark driver's pure parts, and
the committed H100 artifacts.

No GPU exists here or in CI, so NVML is replaced by a fake ``pynvml`` module (a mock, for
what cannot run here); the H100 figures themselves are real artifacts measured on the lent
H100 by benchmarks/gpu_run.sh and are checked for consistency, not re-measured.
"""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import pytest

from core import artifacts
from runtime.hosts import gpu

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gpu-h100"


class _FakeNvml(types.ModuleType):
    """Enough of pynvml for list_gpus and PeakVram; ``used`` and ``procs`` are mutable."""

    NVML_CLOCK_MEM, NVML_CLOCK_SM = 2, 1

    def __init__(self, procs_visible: bool):
        super().__init__("pynvml")
        self.used = 1_000
        self.procs_visible = procs_visible
        self.pid_mem = 0

    def nvmlInit(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("h", i)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(total=85520809984, used=self.used)

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (9, 0)

    def nvmlDeviceGetMemoryBusWidth(self, h):
        return 5120

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        return {2: 2619, 1: 1980}[which]

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return 700_000

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        raise RuntimeError("not supported")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        import os

        if not self.procs_visible:
            return [
                types.SimpleNamespace(pid=1, usedGpuMemory=123)
            ]  # another pid namespace's view
        return [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=self.pid_mem)]


@pytest.fixture
def fake_nvml(monkeypatch):
    def install(procs_visible: bool = True) -> _FakeNvml:
        fake = _FakeNvml(procs_visible)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def test_gpu_fingerprint_fields(fake_nvml):
    fake_nvml()
    [g] = gpu.list_gpus()
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["memory_bytes"] == 85520809984
    assert (g["driver"], g["cuda"], g["compute_capability"]) == (
        "580.159.04",
        "13.0",
        "9.0",
    )
    assert (
        g["memory_bus_width_bits"] == 5120
        and g["max_memory_clock_mhz"] == 2619
        and g["power_limit_w"] == 700
    )
    assert "pcie_generation" not in g  # a probe NVML refuses is left out, not guessed
    assert (
        g["datasheet_bandwidth_bytes_per_s"] == 2619 * 10**6 * 2 * 5120 // 8
    )  # 3.35 TB/s for an H100 SXM


def test_no_nvml_means_no_gpus(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert gpu.list_gpus() == []
    with gpu.PeakVram() as v:
        pass
    assert v.peak is None and v.method is None


def _until(cond, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < end:
        time.sleep(0.002)


def test_peak_vram_per_process(fake_nvml):
    fake = fake_nvml(procs_visible=True)
    with gpu.PeakVram(interval=0.005) as v:
        fake.pid_mem = 5_000
        _until(
            lambda: v.peak == 5_000
        )  # the sampler thread saw it (however busy the process is)
        fake.pid_mem = 2_000
        time.sleep(0.05)
    assert (v.peak, v.method) == (5_000, "process")


def test_peak_vram_falls_back_to_device_delta(fake_nvml):
    """In a container NVML lists processes by pids we cannot match: the device's used memory
    over its value at the start is the measure, and the artifact says which one it is."""
    fake = fake_nvml(procs_visible=False)
    with gpu.PeakVram(interval=0.005) as v:
        fake.used = 1_000 + 7_000
        _until(lambda: v.peak == 7_000)
        fake.used = 1_000 + 3_000
        time.sleep(0.05)
    assert (v.peak, v.method) == (7_000, "device-delta")


# -- the driver's pure parts ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_bench as module

    return module


def test_synthetic_names(gpu_bench):
    assert gpu_bench.synthetic_spec("synthetic-llama-1b-q4_k_m") == (
        "llama-1b",
        "Q4_K_M",
    )
    assert gpu_bench.synthetic_spec("synthetic-llama-8b-q8_0") == ("llama-8b", "Q8_0")
    with pytest.raises(SystemExit):
        gpu_bench.synthetic_spec("llama-8b")


def test_llama_bench_arguments_mirror_the_matrix(gpu_bench):
    from runtime.execution import matrix

    m = matrix.load(str(ROOT / "data" / "matrices" / "gpu-synthetic.yaml"))
    args = gpu_bench.llama_bench_args(m, ["/m/a.gguf"], 16)
    pairs = dict(zip(args[::2], args[1::2]))
    assert (
        pairs["-m"] == "/m/a.gguf"
        and pairs["-p"] == "512"
        and pairs["-n"] == "128"
        and pairs["-d"] == "0,4096"
    )
    assert (
        pairs["-r"] == "5"
        and pairs["-ngl"] == "99"
        and pairs["-b"] == "2048"
        and pairs["-ub"] == "512"
    )
    assert pairs["-t"] == "16" and pairs["-fa"] == "auto" and pairs["-o"] == "json"
    assert (
        gpu_bench.lb_test_name({"n_prompt": 512, "n_gen": 0, "n_depth": 4096})
        == "pp512@d4096"
    )
    assert (
        gpu_bench.lb_test_name({"n_prompt": 0, "n_gen": 128, "n_depth": 0}) == "tg128"
    )


def _run(name: str, test: str, mean: float, samples: list[float]) -> dict:
    return {
        "status": "ok",
        "id": f"id-{name}-{test}",
        "model": {
            "name": name,
            "file_name": f"{name}.gguf",
            "gguf": {"quantization": "Q8_0"},
        },
        "test": {
            "kind": "rate",
            "name": test,
            "n_gen": 128,
            "n_prompt": 0,
            "n_depth": 0,
        },
        "summary": {
            "tokens_per_second": {
                "mean": mean,
                "stddev": 1.0,
                "n": len(samples),
                "median": sorted(samples)[len(samples) // 2],
            }
        },
        "settings": {"effective": {"n_gpu_layers": 17, "flash_attn": "on"}},
    }


def test_fidelity_ratio_against_llama_bench_rounds(gpu_bench):
    ours = [_run("m", "tg128", 100.0, [99, 100, 101])]
    lb = [
        {
            "model_filename": "/x/m.gguf",
            "n_prompt": 0,
            "n_gen": 128,
            "n_depth": 0,
            "avg_ts": 95.0,
            "stddev_ts": 1.0,
            "samples_ts": [94, 95, 96],
        },
        {
            "model_filename": "/x/m.gguf",
            "n_prompt": 0,
            "n_gen": 128,
            "n_depth": 0,
            "avg_ts": 105.0,
            "stddev_ts": 1.0,
            "samples_ts": [104, 105, 106],
        },
        {
            "model_filename": "/x/other.gguf",
            "n_prompt": 0,
            "n_gen": 128,
            "n_depth": 0,
            "avg_ts": 1.0,
            "stddev_ts": 0.0,
            "samples_ts": [1],
        },
    ]
    [row] = gpu_bench.fidelity(ours, lb, None)
    assert row["llama_bench_ts"] == pytest.approx(100.0) and row[
        "ratio"
    ] == pytest.approx(1.0)
    assert row["ratio_per_round"] == pytest.approx([100 / 95, 100 / 105])
    assert row["ratio_median"] == pytest.approx(100 / 100.0)


# -- the committed H100 measurements ---------------------------------------------------------------
def _gpu_docs() -> list[dict]:
    from tests.support.committed import committed_paths

    return [artifacts.load(p) for p in committed_paths("runs/lent-h100-")]


def test_committed_h100_runs_are_full_offload_synthetic_and_match_the_fidelity_table():
    docs = _gpu_docs()
    if not docs:
        pytest.skip("no H100 artifacts in data/runs")
    for d in docs:
        assert d["status"] == "ok" and d["model"]["synthetic"] is True
        assert d["host"]["gpus"][0]["name"].startswith("NVIDIA H100")
    # In-process rate runs: every layer on the GPU, and each one is a row of the fidelity table
    # written by the device call that measured it (the report comes from the artifacts).
    rate = [
        d for d in docs if d["backend"] == "llama_cpp" and d["test"]["kind"] == "rate"
    ]
    assert rate
    rows = {}
    for table_path in sorted(RESULTS.rglob("fidelity.json")):
        for row in json.loads(table_path.read_text())["rows"]:
            rows[row["artifact"]] = row
    for d in rate:
        assert (
            d["build"]["libraries"] == "LLAMA_CPP_LIB_PATH"
            and "CUDA" in d["build"]["system_info"]
        )
        eff = d["settings"]["effective"]
        assert (
            eff["n_gpu_layers"] == eff["n_layers_total"] > 0
        )  # every layer on the GPU
        assert d["resources"]["peak_vram_bytes"] > d["model"]["size_bytes"] * 0.9
        row = rows[d["id"]]
        assert row["ours_ts"] == d["summary"]["tokens_per_second"]["mean"]
        assert 0.8 < row["ratio"] < 1.25
    from tests.support.committed import committed_paths

    hosts = [
        p
        for p in committed_paths("hosts/lent-h100-")
        if p.name.startswith("gpu-bandwidth-")
    ]
    assert hosts
    probe = artifacts.load(hosts[0])
    assert probe["probe"]["kind"] == "gpu_memory_bandwidth"
    assert (
        1000
        < probe["bandwidth"][0]["summary"]["median"]
        < probe["host"]["gpus"][0]["datasheet_bandwidth_bytes_per_s"] / 1e9
    )


def test_gpu_read_probe_writes_the_cpu_probe_shape(gpu_bench):
    """The GPU bandwidth script's pure parts (the CUDA timing itself needs the lent GPU: mocked by
    given seconds): rates count bytes read only for the reduction, both copy and read land in a
    valid host artifact with the CPU probe's row shape."""
    import gpu_bandwidth

    from core import artifacts, stats
    from runtime.hosts import fingerprint as hostinfo

    read = {
        "method": "read-only reduction",
        "library": "torch x",
        "device": "GPU",
        "buffer_bytes": 4 * 2**30,
        "bytes_read_per_pass": 4 * 2**30,
        "iterations": 3,
        **gpu_bandwidth.rates_from_seconds([0.0016, 0.0015, 0.0017], 4 * 2**30),
    }
    assert read["median_bytes_per_s"] == pytest.approx(4 * 2**30 / 0.0016)
    copy = {
        "method": "copy",
        "library": "torch x",
        "device": "GPU",
        "buffer_bytes": 4 * 2**30,
        "iterations": 3,
        "bytes_moved_per_copy": 8 * 2**30,
        **gpu_bandwidth.rates_from_seconds([0.003, 0.0029, 0.0031], 8 * 2**30),
        "read": read,
    }
    rows = gpu_bandwidth.host_bandwidth(read)
    assert rows[0]["threads"] == 1 and rows[0]["summary"] == stats.summarize(
        rows[0]["samples_gbs"]
    )
    assert rows[0]["samples_gbs"][1] == pytest.approx(4 * 2**30 / 0.0015 / 1e9)
    doc = gpu_bench.host_artifact(
        hostinfo.fingerprint(), copy, "2026-11-26T08:00:00+00:00"
    )
    artifacts.validate(doc)
    assert (
        doc["read_bandwidth"] == rows and doc["probe"]["read_bytes_counted"] == "read"
    )
    assert "read_bandwidth" not in gpu_bench.host_artifact(
        hostinfo.fingerprint(), {**copy, "read": None}, "2026-11-26T08:00:00+00:00"
    )
