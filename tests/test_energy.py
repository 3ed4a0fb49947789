"""Energy per token (runtime/hosts/energy.py): RAPL and NVML meters, and how a rate test is metered.

RAPL is read from a powercap tree written under tmp_path in the kernel's layout (this VM exposes
none: the real path is checked for the "not exposed" answer); NVML is a stand-in object with
NVML's calls (no GPU here). The rate-test logic runs the real llama.cpp backend on a tiny
synthetic model with a meter whose energy is a known power times the time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.hosts import energy as E


def _zone(
    root: Path, name: str, label: str, uj: int, max_uj: int = 262143328850
) -> Path:
    z = root / name
    z.mkdir(parents=True)
    (z / "name").write_text(label + "\n")
    (z / "energy_uj").write_text(f"{uj}\n")
    (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return z


def test_rapl_sums_packages_not_their_subzones_and_adds_back_a_wrap(tmp_path):
    p0 = _zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000, max_uj=10_000_000)
    p1 = _zone(tmp_path, "intel-rapl:1", "package-1", 5_000_000)
    _zone(
        tmp_path, "intel-rapl:0:0", "core", 999_000_000
    )  # part of package 0: never added
    _zone(tmp_path, "intel-rapl:2", "psys", 7_000_000)  # the platform, not a package
    m = E.cpu_meter(tmp_path)
    assert m.source == "rapl" and m.devices == ["package-0", "package-1"]
    assert m.read_j() == 0.0
    (p0 / "energy_uj").write_text("3500000\n")  # +2.5 J
    (p1 / "energy_uj").write_text("5250000\n")  # +0.25 J
    assert m.read_j() == pytest.approx(2.75)
    (p0 / "energy_uj").write_text(
        "500000\n"
    )  # wrapped at 10 J: +(10_000_000 + 1 - 3_500_000 + 500_000) uJ
    assert m.read_j() == pytest.approx(2.75 + 7.000001)


def test_rapl_absent_or_unreadable_says_why(tmp_path, monkeypatch):
    with pytest.raises(
        E.Unavailable, match="CPU energy not exposed on this host: no RAPL"
    ):
        E.cpu_meter(tmp_path / "powercap")
    (tmp_path / "empty").mkdir()
    with pytest.raises(E.Unavailable, match="no RAPL package zone"):
        E.cpu_meter(tmp_path / "empty")
    z = _zone(tmp_path / "locked", "intel-rapl:0", "package-0", 1)
    real_read = Path.read_text

    def read_text(self, *a, **k):
        if self == z / "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real_read(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", read_text)
    with pytest.raises(E.Unavailable, match="readable by root only"):
        E.cpu_meter(tmp_path / "locked")


def test_this_host_answers_for_its_cpu():
    """This VM has no /sys/class/powercap (checked when this was written): the meter says so."""
    meter, reason = E.meter_for(on_gpu=False)
    if E.POWERCAP.is_dir():
        pytest.skip("this host exposes a powercap tree")
    assert meter is None and reason.startswith("CPU energy not exposed on this host")


class FakeNvml:
    """NVML's calls as the energy meter uses them, for GPUs that are not here."""

    class NotSupported(Exception):
        pass

    def __init__(self, energy_mj: list[int], supported: bool = True):
        self.energy_mj = energy_mj
        self.supported = supported

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.energy_mj)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.supported:
            raise self.NotSupported("Not Supported")
        return self.energy_mj[h]


def test_nvml_meter_sums_the_visible_gpus(monkeypatch):
    nv = FakeNvml([1000, 20_000, 300_000])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    m = E.gpu_meter(nv)
    assert m.devices == ["GPU0 NVIDIA H200", "GPU1 NVIDIA H200", "GPU2 NVIDIA H200"]
    assert m.read_j() == pytest.approx(321.0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    m = E.gpu_meter(nv)
    assert m.devices == ["GPU2 NVIDIA H200", "GPU0 NVIDIA H200"]
    nv.energy_mj[2] += 1500
    assert m.read_j() == pytest.approx(302.5)
    # CUDA's rule (runtime.hosts.devices): the list ends at the first entry naming no device
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,7,0")
    assert E.gpu_meter(nv).devices == ["GPU1 NVIDIA H200"]
    # a run on some visible GPUs: those metered, the others apart (idle draw, never in J/token)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert E.gpu_meter(nv, used=[0]).devices == ["GPU0 NVIDIA H200"]
    assert E.gpu_meter(nv, used=[0], idle=True).devices == [
        "GPU1 NVIDIA H200",
        "GPU2 NVIDIA H200",
    ]
    assert E.idle_meter(None) is None
    with pytest.raises(
        E.Unavailable, match="nvmlDeviceGetTotalEnergyConsumption fails on GPU 0"
    ):
        E.gpu_meter(FakeNvml([1], supported=False))


class PowerMeter:
    """A counter at constant power in steps of ``step_s`` (like NVML's), from the real clock."""

    def __init__(self, watts: float, step_s: float = 0.0):
        self.watts, self.step_s, self.t0 = watts, step_s, time.perf_counter()

    def __call__(self) -> float:
        t = time.perf_counter() - self.t0
        if self.step_s:
            t = (t // self.step_s) * self.step_s
        return self.watts * t


def _meter(watts: float, step_s: float = 0.0) -> E.EnergyMeter:
    return E.EnergyMeter("nvml", "gpu", ["GPU0 test"], PowerMeter(watts, step_s))


def test_long_repetitions_are_metered_one_by_one():
    e = E.RateEnergy(_meter(200.0), None, n_prompt=0, n_gen=100, window_s=0.05)
    for _ in range(3):
        e0, t0 = e.read(), time.perf_counter()
        time.sleep(0.06)
        e.add(e0, e.read(), time.perf_counter() - t0)
    e.finish(lambda: pytest.fail("no regions when repetitions are long enough"))
    vals = e.metrics()["decode_j_per_token"]
    assert len(vals) == 3 and all(
        v == pytest.approx(200.0 * r["s"] / 100, rel=0.05)
        for v, r in zip(vals, e.repetitions)
    )
    d = e.details()
    assert d["available"] and d["method"] == "per repetition" and d["part"] == "decode"
    assert d["mean_power_w"] == pytest.approx(200.0, rel=0.05)
    assert "counter_step_ms" in d or d.get("counter_step_ms") is None


def test_short_repetitions_are_metered_as_regions_of_k():
    """A 5 ms repetition under a counter that steps every 20 ms: single readings are mostly steps;
    regions of k repetitions lasting the window give the power back."""
    e = E.RateEnergy(
        _meter(100.0, step_s=0.02),
        None,
        n_prompt=64,
        n_gen=0,
        window_s=0.2,
        n_regions=3,
    )

    def once():
        time.sleep(0.005)

    for _ in range(4):
        e0, t0 = e.read(), time.perf_counter()
        once()
        e.add(e0, e.read(), time.perf_counter() - t0)
    e.finish(once)
    assert len(e.regions) == 3
    ks = [r["repetitions"] for r in e.regions]
    assert min(ks) >= 2 and e.details()["method"].startswith("regions of ")
    vals = e.metrics()["prefill_j_per_token"]
    for v, r in zip(vals, e.regions):
        assert r["s"] >= 0.2  # repetitions until the region lasts the window
        assert v == pytest.approx(
            100.0 * r["s"] / (r["repetitions"] * 64), rel=0.25
        )  # within a counter step
    # the step, as seen by a poll that a busy host may delay (a continuous counter would read ~0 ms)
    assert 5.0 < e.details()["counter_step_ms"] < 100.0


def test_what_is_not_metered_says_why():
    depth = E.RateEnergy(
        _meter(50.0), None, n_prompt=0, n_gen=16, n_depth=512, window_s=1.0
    )
    depth.add(0.0, 0.1, 0.01)
    depth.finish(lambda: pytest.fail("a depth test runs no regions"))
    assert depth.metrics() == {} and "prefills its context" in depth.details()["note"]
    both = E.RateEnergy(_meter(50.0), None, n_prompt=32, n_gen=16, window_s=1.0)
    both.add(0.0, 0.1, 0.01)
    both.finish(lambda: pytest.fail("pp+tg runs no regions"))
    assert both.metrics() == {} and "no per-phase figure" in both.details()["note"]
    none = E.RateEnergy(
        None, "CPU energy not exposed on this host: no RAPL", n_prompt=8, n_gen=0
    )
    none.add(none.read(), none.read(), 1.0)
    none.finish(lambda: None)
    assert none.metrics() == {} and none.details() == {
        "available": False,
        "reason": "CPU energy not exposed on this host: no RAPL",
    }


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from runtime.models import synth
    from runtime.models.registry import resolve

    path = tmp_path_factory.mktemp("tiny") / "tiny-llama-q8_0.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", path)
    return resolve(str(path))


def test_llama_cpp_rate_meters_its_timed_regions(tiny_model, monkeypatch):
    """The real backend on a 4M-parameter model: tg16 repetitions last a few ms, so the figure
    comes from regions of k repetitions; the meter runs at a known 80 W."""
    from runtime.execution.worker import run_job

    monkeypatch.setattr(E, "meter_for", lambda on_gpu, gpus=None: (_meter(80.0), None))
    monkeypatch.setattr(E, "WINDOW_S", 0.1)
    monkeypatch.setattr(E, "REGIONS", 3)
    res = run_job(
        {
            "backend": "llama_cpp",
            "model": tiny_model.to_dict(),
            "settings": {"n_threads": 1},
            "test": {"kind": "rate", "n_gen": 16, "repetitions": 3},
        }
    )
    assert res["status"] == "ok", res.get("error")
    d = res["details"]["energy"]
    assert (
        d["available"]
        and d["part"] == "decode"
        and d["method"].startswith("regions of ")
    )
    regions = res["samples"]["energy"]["regions"]
    assert len(regions) == 3 and len(res["samples"]["energy"]["repetitions"]) == 3
    vals = res["metrics"]["decode_j_per_token"]
    for v, r in zip(vals, regions):
        assert r["s"] >= 0.1
        assert v == pytest.approx(80.0 * r["s"] / (r["repetitions"] * 16), rel=0.02)
    assert "prefill_j_per_token" not in res["metrics"]


def test_llama_cpp_rate_on_this_host_says_why_not(tiny_model):
    from runtime.execution.worker import run_job

    if E.POWERCAP.is_dir():
        pytest.skip("this host exposes a powercap tree")
    res = run_job(
        {
            "backend": "llama_cpp",
            "model": tiny_model.to_dict(),
            "settings": {"n_threads": 1, "n_gpu_layers": 0},
            "test": {"kind": "rate", "n_prompt": 32, "repetitions": 2},
        }
    )
    assert res["status"] == "ok"
    assert res["details"]["energy"] == {
        "available": False,
        "reason": f"CPU energy not exposed on this host: no RAPL ({E.POWERCAP} is absent)",
    }
    assert "prefill_j_per_token" not in res["metrics"]
