"""Big hosts (issue 29): visible GPUs, links and NUMA in the fingerprint, placement settings and
their refusals, per-GPU measurement, and the committed 2x H200 artifacts.

No GPU exists here or in CI: NVML is replaced by a fake ``pynvml`` (a mock, for what cannot run
here). The placement refusals run the real CLI on this host (no GPU, one NUMA node); the
2x H200 figures are real artifacts measured on the lent machine by benchmarks/gpu_run.sh and
are checked for consistency, not re-measured.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from core import hostid, hostlabel
from core.errors import ConfigError
from core.records.run import RunRecord
from runtime.hosts import devices, placement
from tests.conftest import ROOT, tree_snapshot, write_matrix
from tests.support.committed import committed_paths

TWO = "gpu-2x-h200-872ccffb"  # both GPUs visible
ONE = "gpu-2x-h200-b0085864"  # CUDA_VISIBLE_DEVICES=0


# -- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------
DEVS = [
    devices.Device(0, "GPU-aaaa-1111", "0000:00:06.0"),
    devices.Device(1, "GPU-bbbb-2222", "0000:00:07.0"),
    devices.Device(2, "GPU-cccc-3333", "0000:00:08.0"),
]


@pytest.mark.parametrize(
    "raw, want",
    [
        (None, [0, 1, 2]),  # unset: every GPU
        ("", []),  # set but empty: none
        ("0", [0]),
        ("2,0", [2, 0]),  # CUDA renumbers: ordinal 0 is machine GPU 2
        ("1,7,0", [1]),  # the list ends at the first entry naming no device
        ("-1", []),
        ("GPU-bbbb", [1]),  # a unique UUID prefix
        ("GPU-cccc-3333,0", [2, 0]),
        ("0,0", []),  # a device twice: CUDA refuses the whole list
    ],
)
def test_visible_devices_follow_cuda(raw, want):
    assert [d.nvml_index for d in devices.parse_visible(raw, DEVS)] == want


def test_bus_ids_and_cpulists():
    assert devices.normalise_bus_id("00000000:1A:00.0") == "0000:1a:00.0"
    assert devices.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert devices.parse_cpu_mask("0xff") == set(range(8))
    assert devices.parse_cpu_mask("5") == {0, 2}
    with pytest.raises(ValueError, match="not a hex CPU mask"):
        devices.parse_cpu_mask("0xzz")


def test_numa_nodes_from_sysfs(tmp_path):
    for n, cpus, kib in ((0, "0-47", 528_000_000), (1, "48-95", 529_000_000)):
        d = tmp_path / f"node{n}"
        d.mkdir()
        (d / "cpulist").write_text(cpus + "\n")
        (d / "meminfo").write_text(
            f"Node {n} MemTotal:       {kib} kB\nNode {n} MemFree: 1 kB\n"
        )
    nodes = devices.numa_nodes(tmp_path)
    assert [(x["node"], x["logical_cores"], x["memory_bytes"]) for x in nodes] == [
        (0, 48, 528_000_000 * 1024),
        (1, 48, 529_000_000 * 1024),
    ]


class _Nvml(types.ModuleType):
    """Two GPUs joined by 18 NVLink 4 links through an NVSwitch, as the lent 2x H200 showed."""

    NVML_FEATURE_ENABLED = 1
    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    def __init__(self):
        super().__init__("pynvml")

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=f"00000000:00:0{6 + h}.0")

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}"

    def nvmlDeviceGetP2PStatus(self, a, b, cap):
        return 0

    def nvmlDeviceGetNvLinkState(self, h, link):
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, h, link):
        return types.SimpleNamespace(busId="00000000:00:10.0")  # the switch

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        return 2

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return 6  # NVML's enum for NVLink 4.0


def test_links_and_visible_gpus_from_nvml(monkeypatch):
    nv = _Nvml()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    vis = devices.visible(nv)
    assert [d.pci_bus_id for d in vis] == ["0000:00:06.0", "0000:00:07.0"]
    [link] = devices.links(nv, vis)
    assert link == {
        "gpus": ["0000:00:06.0", "0000:00:07.0"],
        "kind": "NVLink",
        "nvlink_links": 18,
        "via_nvswitch": True,
        "nvlink_version": "4.0",
    }
    assert hostlabel.link_label([link]) == "NVLink 4 ×18"
    assert (
        hostlabel.link_label([{**link, "nvlink_version": 6}]) == "NVLink 4 ×18"
    )  # as first recorded
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [d.nvml_index for d in devices.visible(nv)] == [1]
    assert devices.host_count(nv) == 2


# -- identity and labels -----------------------------------------------------------------------
def _fp(**kw):
    fp = {
        "name": "gpu-2x-h200",
        "cpu": {
            "vendor": "GenuineIntel",
            "arch": "x86_64",
            "physical_cores": 32,
            "logical_cores": 32,
        },
        "memory_bytes": 256 * 2**30,
        "numa_nodes": 1,
        "gpus": [{"name": "NVIDIA H200", "memory_bytes": 150754820096}],
        "id_scheme": 2,
    }
    fp.update(kw)
    return fp


LINK = {
    "gpus": ["a", "b"],
    "kind": "NVLink",
    "nvlink_links": 18,
    "nvlink_version": "4.0",
}
GPU = {"name": "NVIDIA H200", "memory_bytes": 150754820096}


def test_one_of_two_and_both_are_two_environments():
    one = _fp(gpus_on_host=2)
    both = _fp(gpus=[GPU, GPU], gpus_on_host=2, gpu_links=[LINK])
    assert hostid.host_id(one) != hostid.host_id(both)
    assert hostlabel.derived_label(one) == "H200 · 140 GiB ×1 of 2"
    assert hostlabel.derived_label(both) == "2× H200 · 140 GiB each · NVLink 4 ×18"
    fact, _a, _b = hostid.differing_fact(one, both)
    assert fact == "gpus"


def test_a_whole_machine_keeps_its_id():
    """A host whose run sees every GPU, with one GPU or none, has the facts it always had: the
    new fields change no id, so every committed host keeps its id."""
    old = _fp()
    assert hostid.host_id(
        {**old, "gpus_on_host": 1, "numa": [{"node": 0}]}
    ) == hostid.host_id(old)
    cpu = _fp(gpus=[])
    assert hostid.host_id({**cpu, "gpus_on_host": 0}) == hostid.host_id(cpu)


def test_an_older_fingerprint_still_reconciles():
    """An id_scheme 1 fingerprint of the 2-GPU machine (no signature, no links) joins the newer
    host that agrees with it on every fact both record."""
    newer = _fp(gpus=[GPU, GPU], gpus_on_host=2, gpu_links=[LINK])
    newer["id"] = hostid.host_id(newer)
    older = {
        k: v
        for k, v in newer.items()
        if k not in ("id_scheme", "gpu_links", "gpus_on_host")
    }
    older["id"] = "gpu-2x-h200-00000000"
    docs = [{"host": newer}, {"host": older}]
    assert hostid.resolve_legacy(docs) == {"gpu-2x-h200-00000000": newer["id"]}


# -- placement: checks, GPUs used, flags -------------------------------------------------------
HOST2 = placement.HostView(
    gpus=2, gpus_on_host=2, numa_nodes=1, cpus=frozenset(range(32))
)
NOGPU = placement.HostView(gpus=0, gpus_on_host=0, numa_nodes=1, cpus=frozenset({0, 1}))


@pytest.mark.parametrize(
    "settings, host, field, message",
    [
        (
            {"main_gpu": 5},
            HOST2,
            "main_gpu",
            "main_gpu 5 is not a visible GPU: this host shows 2 GPUs (0-1)",
        ),
        (
            {"tensor_split": [1, 1, 1]},
            HOST2,
            "tensor_split",
            "tensor_split has 3 shares but this host shows 2",
        ),
        (
            {"split_mode": "none", "tensor_split": [1, 0]},
            HOST2,
            "tensor_split",
            "one GPU (main_gpu) holds",
        ),
        ({"split_mode": "row"}, NOGPU, "split_mode", "this host has no visible GPU"),
        ({"split_mode": "tensor"}, NOGPU, "split_mode", "this host has no visible GPU"),
        (
            {"split_mode": "tensor", "flash_attn": "off"},
            HOST2,
            "split_mode",
            "tensor parallelism needs flash attention",
        ),
        (
            {"numa": "distribute"},
            HOST2,
            "numa",
            "needs several NUMA nodes, but this host has 1",
        ),
        (
            {"cpu_mask": "0x1f0"},
            NOGPU,
            "cpu_mask",
            "names CPUs 4-8 outside this host's CPUs (0-1)",
        ),
    ],
)
def test_placement_refusals(settings, host, field, message):
    with pytest.raises(ConfigError) as e:
        placement.check(settings, host)
    assert e.value.field == field and message in str(e.value)


def test_gpus_used_and_flags():
    assert placement.gpus_used({"split_mode": "none", "main_gpu": 1}, 2) == [1]
    assert placement.gpus_used({"split_mode": "layer"}, 2) == [0, 1]
    assert placement.gpus_used({"split_mode": "row", "tensor_split": [0, 1]}, 2) == [1]
    assert placement.gpus_used({}, 2, offload=False) == []
    eff = placement.effective({"split_mode": "none"}, HOST2)
    assert eff["gpus_used"] == [0] and eff["gpus_visible"] == 2 and eff["poll"] == 50
    assert placement.cli_args({"split_mode": "row", "tensor_split": [3, 1], "numa": "isolate", "poll": 0}) == [
        "-sm", "row", "-mg", "0", "-ts", "3/1", "--numa", "isolate", "--poll", "0",
    ]  # fmt: skip
    assert placement.cli_args({"tensor_split": [3, 1]}, server=True)[-2:] == [
        "-ts",
        "3,1",
    ]


BASE = "schema_version: 1\nname: m\nmodels: [gemma3-270m-q4_k_m]\n"


@pytest.mark.integration  # runs `invoke bench` as a subprocess
@pytest.mark.parametrize(
    "settings, pattern",
    [
        (
            "{main_gpu: 5}",
            r"settings\.main_gpu: main_gpu 5 places a model on GPUs, but this host has no visible GPU",
        ),
        (
            "{split_mode: row}",
            r"settings\.split_mode: split_mode 'row' places a model on GPUs",
        ),
        (
            "{numa: distribute}",
            r"settings\.numa: numa 'distribute' needs several NUMA nodes, but this host has 1",
        ),
        (
            "{prio: 2}",
            r"settings\.prio: prio 2: llama-cpp-python attaches no thread pool",
        ),
        (
            "{cpu_mask: '0x100'}",
            r"settings\.cpu_mask: cpu_mask 0x100 names CPU 8 outside this host's CPUs",
        ),
        ("{tensor_split: [1, -1]}", r"tensor_split .*shares must be >= 0"),
    ],
)
def test_bench_refuses_placement_the_host_cannot_honour(settings, pattern, data_env):
    """One line naming the matrix, the setting and what the host has; exit 2; nothing measured."""
    if (
        len(os.sched_getaffinity(0)) > 8
        or Path("/sys/devices/system/node/node1").exists()
    ):
        pytest.skip("written for this 2-core, one-node, GPU-less host")
    write_matrix(data_env, "m", BASE + f"settings: {settings}\ntests: [pp8]\n")
    before = tree_snapshot(data_env)
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "m"],
        cwd=ROOT,
        env=dict(os.environ, ALMANAC_DATA=str(data_env)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "matrices/m.yaml" in lines[0] and re.search(pattern, lines[0]), lines[0]
    assert tree_snapshot(data_env) == before and not (data_env / "runs").exists()


# -- the committed 2x H200 runs ----------------------------------------------------------------
def _runs(host: str) -> list[dict]:
    return [
        RunRecord(json.loads(p.read_text()))
        for p in sorted(committed_paths(f"runs/{host}"))
    ]


def test_two_gpu_runs_record_their_placement():
    docs = {(d["matrix"]["name"], d["test"]["name"]): d for d in _runs(TWO)}
    host = docs[("gpu-split-layer", "pp512")]["host"]
    assert host["gpus_on_host"] == 2 and len(host["gpus"]) == 2
    assert [lk["kind"] for lk in host["gpu_links"]] == ["NVLink"] and host["gpu_links"][
        0
    ]["nvlink_links"] == 18
    assert hostlabel.derived_label(host) == "2× H200 · 140 GiB each · NVLink 4 ×18"
    for test in ("pp512", "tg128"):
        layer, none = docs[("gpu-split-layer", test)], docs[("gpu-split-none", test)]
        assert layer["settings"]["effective"]["gpus_used"] == [0, 1]
        assert none["settings"]["effective"]["gpus_used"] == [0]
        # per-GPU peak memory: the layer split holds about half the model on each card
        a, b = (g["peak_bytes"] for g in layer["resources"]["peak_vram_by_gpu"])
        solo, idle = (g["peak_bytes"] for g in none["resources"]["peak_vram_by_gpu"])
        assert 0.4 < a / solo < 0.6 and 0.4 < b / solo < 0.6 and idle < 0.1 * solo
        # energy: the used GPUs only; the idle one apart
        e_none, e_layer = none["details"]["energy"], layer["details"]["energy"]
        assert len(e_none["devices"]) == 1 and e_none["idle_gpus"]["devices"][
            0
        ].startswith("GPU1")
        assert len(e_layer["devices"]) == 2 and "idle_gpus" not in e_layer
    row = docs[("gpu-split-row", "pp512")]
    assert (
        row["status"] == "failed"
        and "does not support split buffers" in row["log_tail"]
    )


def test_one_gpu_of_two_is_its_own_environment():
    one = _runs(ONE)
    assert one and {d["host"]["id"] for d in one} == {ONE}
    host = one[0]["host"]
    assert (
        host["visible_devices"] == "CUDA_VISIBLE_DEVICES=0" and len(host["gpus"]) == 1
    )
    assert hostlabel.derived_label(host) == "H200 · 140 GiB ×1 of 2"
    assert ONE != TWO and host["name"] == _runs(TWO)[0]["host"]["name"]


class _Vanishing(_Nvml):
    """Two GPUs whose memory NVML reads until ``gone`` (a GPU that fell off the bus mid-run)."""

    gone = False

    def nvmlDeviceGetMemoryInfo(self, h):
        if self.gone:
            raise RuntimeError("GPU is lost")
        return types.SimpleNamespace(total=150 * 2**30, used=2**30 * (h + 1))

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return []

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=40 + h)


def test_peak_per_gpu_and_a_gpu_lost_mid_run(monkeypatch):
    import time

    from runtime.hosts import gpu

    fake = _Vanishing()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with gpu.PeakVram(interval=0.005) as v:
        time.sleep(0.05)
    assert v.error is None
    assert [
        (g["index"], g["pci_bus_id"], g["utilisation_max_pct"]) for g in v.per_gpu()
    ] == [
        (0, "0000:00:06.0", 40),
        (1, "0000:00:07.0", 41),
    ]
    with gpu.PeakVram(interval=0.005) as v:
        fake.gone = True
        time.sleep(0.05)
    assert v.error == "NVML lost a GPU during the run: RuntimeError: GPU is lost"


def test_numa_and_cpu_mask_reach_llama_cpp(tmp_path, monkeypatch):
    """What reaches llama.cpp in process, on the real backend and a 4M-parameter model: the NUMA
    strategy (llama_numa_init through llama-cpp-python's ``numa``) and the CPU mask (the process's
    affinity, which llama.cpp's threads inherit), recorded among the effective settings. This host
    has one NUMA node, so the host view is widened to two (no multi-node host was lent)."""
    from runtime.execution.worker import run_job
    from runtime.models import synth
    from runtime.models.registry import resolve

    path = tmp_path / "tiny-llama-q8_0.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", path)
    cpus = os.sched_getaffinity(0)
    two = placement.HostView(gpus=0, gpus_on_host=0, numa_nodes=2, cpus=frozenset(cpus))
    monkeypatch.setattr(placement.HostView, "here", classmethod(lambda cls: two))
    try:
        res = run_job(
            {
                "backend": "llama_cpp",
                "model": resolve(str(path)).to_dict(),
                "settings": {"n_threads": 1, "numa": "distribute", "cpu_mask": "0x1"},
                "test": {"kind": "rate", "n_gen": 4, "repetitions": 2},
            }
        )
    finally:
        # the job ran in this process (a run's job has a process of its own): the mask it set is undone, or
        # every later test of this pytest worker, and every process it starts, would run on CPU 0 alone
        os.sched_setaffinity(0, cpus)
    assert res["status"] == "ok", res.get("error")
    eff = res["load"]["effective_settings"]
    assert (eff["numa"], eff["numa_nodes"], eff["cpu_mask"]) == ("distribute", 2, "0x1")
    assert eff["gpus_used"] == [] and eff["split_mode"] == "layer"
    assert eff["cpu_mask_method"].startswith("process affinity")


def test_llama_server_gets_the_placement_flags_and_others_refuse_them():
    from runtime.backends.openai_http.backend import OpenAIHttpBackend
    from runtime.backends.openai_http.config import OpenAIHttpSettings

    model = types.SimpleNamespace(kind="file", name="m", path="/m.gguf")
    with pytest.raises(
        ConfigError, match="split_mode reaches a llama-server this backend starts"
    ):
        OpenAIHttpBackend.preflight(OpenAIHttpSettings(split_mode="row"), model, None)
    with pytest.raises(ConfigError, match="this host has no visible GPU"):
        if placement.HostView.here().gpus:
            pytest.skip("written for a GPU-less host")
        OpenAIHttpBackend.preflight(
            OpenAIHttpSettings(server="llama-server", split_mode="row"), model, None
        )
    s = OpenAIHttpSettings(server="llama-server", poll=0, prio=2)
    OpenAIHttpBackend.preflight(
        s, model, None
    )  # CPU placement is honoured by llama-server
    assert placement.cli_args(s, server=True) == [
        "-sm",
        "layer",
        "-mg",
        "0",
        "--prio",
        "2",
        "--poll",
        "0",
    ]


# -- planner, scaling and pages on the committed 2x H200 runs -------------------------------------
def _all_runs() -> list[dict]:
    from tests.support.committed import committed_paths

    return [
        RunRecord(json.loads(p.read_text()))
        for p in sorted(committed_paths("runs/gpu-2x-h200-"))
    ]


def test_layer_split_follows_llama_cpp():
    from pipelines import memory as mem

    devs = mem.layer_devices(32, [1.0, 1.0])  # the 8B: 32 layers and the output layer
    assert devs[:-1].count(0) == 17 and devs[:-1].count(1) == 15 and devs[-1] == 1
    assert mem.layer_devices(4, [3.0, 1.0]) == [0, 0, 0, 0, 1]


def test_tensor_split_is_llama_cpps_successor_to_row():
    """Recent llama.cpp's CUDA backend has no split buffers (row split fails to load); its tensor
    parallelism is split_mode tensor: it reaches llama.cpp, llama-bench and llama-server, and the
    planner splits every layer's weights and KV cache by the shares."""
    import llama_cpp

    from pipelines import memory as mem
    from runtime.backends.llama_cpp.config import LlamaCppSettings

    s = LlamaCppSettings(split_mode="tensor", flash_attn="on", tensor_split=[3, 1])
    placement.check(s, HOST2)  # accepted with flash attention
    assert placement.gpus_used(s, 2) == [0, 1]
    assert placement.cli_args(s)[:2] == ["-sm", "tensor"]
    assert placement.cli_args(s, server=True)[4:6] == ["-ts", "3,1"]
    assert llama_cpp.LLAMA_SPLIT_MODE_TENSOR == 3
    docs = _all_runs()
    shape = mem.ModelShape.from_facts(
        docs[0]["model"]["gguf"], docs[0]["model"]["name"]
    )
    kw = dict(n_gpus=2, runtime_overhead=0)
    tensor = mem.split_gpu_plans(
        shape, 4096, split_mode="tensor", tensor_split=[3, 1], **kw
    )
    layer = mem.split_gpu_plans(shape, 4096, split_mode="layer", **kw)
    w = [p.components["weights (tensor slice)"] for p in tensor]
    kv = [p.components["KV cache"] for p in tensor]
    assert w[0] == pytest.approx(3 * w[1], rel=1e-6) and kv[0] == pytest.approx(
        3 * kv[1], rel=1e-6
    )
    # the whole model and cache, once over both cards, as in the layer split
    total_w = sum(p.components["weights"] for p in layer)
    assert sum(w) == pytest.approx(total_w, rel=0.01)
    assert sum(kv) == pytest.approx(
        sum(p.components["KV cache"] for p in layer), rel=0.01
    )


def test_split_plan_per_gpu_matches_the_measured_peaks():
    """Done-when of issue 29: the planner's per-GPU prediction within 10% of each GPU's measured peak
    (the overhead per working GPU: the one-GPU residual, as the Memory planner page takes it)."""
    from pipelines import memory as mem

    docs = _all_runs()
    overhead, n = mem.gpu_overhead_from_runs(docs)
    assert overhead is not None and n >= 10
    preds = [p for p in mem.split_predictions(docs, overhead) if len(p["gpus"]) == 2]
    layer = [p for p in preds if p["split_mode"] == "layer"]
    assert len(layer) >= 2 and all(g["within_10pct"] for p in layer for g in p["gpus"])
    # a tensor split: each run predicted with the communicators' share of the other tensor runs
    tensor = [p for p in preds if p["split_mode"] == "tensor"]
    assert len(tensor) == 2 and all(p["comm_runs"] == 1 for p in tensor)
    assert all(g["within_10pct"] and not g["idle"] for p in tensor for g in p["gpus"])
    assert 500 * 2**20 < tensor[0]["comm_overhead"] < 1200 * 2**20
    none = [p for p in preds if p["split_mode"] == "none"]
    assert none and all(
        p["gpus"][0]["within_10pct"] and p["gpus"][1]["idle"] for p in none
    )
    # what fits on several cards: a layer split needs more 8 GiB cards as the context grows
    shape = mem.ModelShape.from_facts(
        docs[0]["model"]["gguf"], docs[0]["model"]["name"]
    )
    settings = mem.load_planner_settings()
    small = [
        mem.cards_needed(shape, ctx, "f16", 8 * 2**30, settings)
        for ctx in (4096, 131072)
    ]
    assert small[0] is not None and (small[1] is None or small[1] >= small[0])


def test_scaling_view_speedup_with_ci():
    from pipelines import scaling
    from pipelines.site import scaling_page

    docs = [
        RunRecord(json.loads(p.read_text())) for p in sorted(committed_paths("runs"))
    ]
    pts = [p for p in scaling.points(docs) if p.model == "synthetic-llama-8b-q8_0"]
    two = {
        (p.test, p.placement.split_mode): p for p in pts if p.placement.gpus_used == 2
    }
    assert set(two) == {(t, m) for t in ("pp512", "tg128") for m in ("layer", "tensor")}
    for p in two.values():
        assert (
            p.baseline.host_id == p.host_id == TWO
        )  # the same environment but for the split
    for t in (
        "pp512",
        "tg128",
    ):  # a layer split runs the layers one GPU after the other
        c = two[(t, "layer")].speedup
        assert 0.97 < c.ratio < 1.01 and c.ci95_low < 1 < c.ci95_high
        assert c.verdict == "within noise"
    # tensor parallelism computes every layer on both GPUs at once: prefill gains most
    pp, tg = two[("pp512", "tensor")].speedup, two[("tg128", "tensor")].speedup
    assert pp.verdict == tg.verdict == "win" and pp.ci95_low > 1.3 and tg.ci95_low > 1.0
    assert pp.ratio > tg.ratio
    page = scaling_page.scaling_page(docs)
    assert "2 of 2 GPUs · layer split · NVLink 4 ×18" in page and "×0.992" in page
    assert "2 of 2 GPUs · tensor split · NVLink 4 ×18" in page and "×1.417" in page
    assert (
        r"1 of 2 GPUs \(1 visible\)" in page and "1 of 2 GPUs · split none" in page
    )  # markdown-escaped


def test_leaderboard_shows_placement_only_where_recorded():
    from pipelines import facts
    from pipelines.site import leaderboard_page

    docs = [
        RunRecord(json.loads(p.read_text())) for p in sorted(committed_paths("runs"))
    ]
    fx = facts.of(docs)
    boards = {b.model: b for b in fx.boards if b.tests == ["pp512", "tg128"]}
    if not boards:
        pytest.skip("no paired boards API here")
    eight = leaderboard_page.board_markdown(boards["synthetic-llama-8b-q8_0"], 0)
    assert "placement" in eight and "2 of 2 GPUs · layer split" in eight
    older = next(b for m, b in boards.items() if m.startswith("gemma"))
    assert "placement" not in leaderboard_page.board_markdown(older, 1)
