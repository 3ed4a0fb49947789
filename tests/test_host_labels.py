"""Issues 19 (item 3) and 27: hosts have names people read, made in one place (core.hostlabel,
pipelines.hostnames): one unit for memory, generations the flags do not contradict, alike hosts
told apart by what differs."""

from __future__ import annotations

import pytest

from core import hostlabel
from core.errors import ConfigError
from pipelines import hostnames
from runtime.hosts import inventory
from tests.support.committed import committed_runs


def _fp(**kw):
    cpu = {
        "model": "Intel(R) Xeon(R) Processor",
        "vendor": "GenuineIntel",
        "logical_cores": 2,
        "hypervisor": True,
        "flags": ["avx2", "avx512f", "avx512_vnni"],
    }
    cpu.update(kw.pop("cpu", {}))
    return {"id": "x", "cpu": cpu, "memory_bytes": 24 << 30, "gpus": [], **kw}


def test_committed_hosts_get_readable_distinct_labels():
    got = hostlabel.resolve(hostlabel.fingerprints(committed_runs()))
    # GPUs: the driver's name without vendor and size, the memory in GiB from the bytes: an H100 and an H200 alike
    assert got["lent-h100-920a23c0"] == "H100 HBM3 · 80 GiB"
    # a whole one-GPU H200 machine, and one H200 of a two-GPU machine (its own environment)
    assert got["lent-h200-c4a881f9"] == "H200 · 140 GiB"
    assert got["gpu-2x-h200-b0085864"] == "H200 · 140 GiB ×1 of 2"
    # the two machines once pooled as vm-0372cd29 (a generic model string: the generation from the flags)
    assert got["vm-0372cd29"] == "Xeon Sapphire Rapids+ · 2 vCPU · 24 GiB"
    assert (
        got["vm-fafe2774"] == "Xeon Sapphire Rapids+ (AMX hidden) · 2 vCPU · 24 GiB"
    )  # never "Cooper Lake"
    assert got["vm-55ecea05"] == "EPYC Zen 4 · 2 vCPU · 24 GiB"
    assert len(set(got.values())) == len(got)


def _sig(family, model, stepping=None):
    return {
        "family": family,
        "model": model,
        **({"stepping": stepping} if stepping is not None else {}),
    }


SPR_FLAGS = [
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512vbmi",
    "avx512_fp16",
    "avx_vnni",
]
AMX = ["amx_tile", "amx_int8", "amx_bf16"]


@pytest.mark.parametrize(
    "fp,label",
    [
        (_fp(), "Xeon Cascade Lake · 2 vCPU · 24 GiB"),  # the example
        (_fp(cpu={"flags": ["avx2", "avx512f"]}), "Xeon Skylake-SP · 2 vCPU · 24 GiB"),
        (
            _fp(
                cpu={
                    "model": "AMD Ryzen 9 7950X 16-Core Processor",
                    "vendor": "AuthenticAMD",
                    "logical_cores": 32,
                    "hypervisor": False,
                }
            ),
            "Ryzen 9 7950X · 32 cores · 24 GiB",
        ),  # a specific model string is kept
        (
            _fp(gpus=[{"name": "NVIDIA H200", "memory_bytes": 150754820096}] * 2),
            "2× H200 · 140 GiB each",
        ),
        (
            _fp(gpus=[{"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984}]),
            "H100 HBM3 · 80 GiB",
        ),
        ({"id": "bare"}, "CPU"),  # nothing known: still a label
        # from the flags: AVX-VNNI and AVX-512 BF16 without AMX is a Sapphire Rapids-class CPU with AMX hidden
        (
            _fp(
                cpu={
                    "flags": [
                        "avx2",
                        "avx512f",
                        "avx512_vnni",
                        "avx512_bf16",
                        "avx_vnni",
                    ]
                }
            ),
            "Xeon Sapphire Rapids+ (AMX hidden) · 2 vCPU · 24 GiB",
        ),
        (
            _fp(cpu={"flags": ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]}),
            "Xeon Cooper Lake · 2 vCPU · 24 GiB",
        ),
        (
            _fp(cpu={"flags": SPR_FLAGS + AMX}),
            "Xeon Sapphire Rapids+ · 2 vCPU · 24 GiB",
        ),
        # from the signature where recorded
        (
            _fp(cpu={"flags": SPR_FLAGS + AMX, "signature": _sig(6, 143, 8)}),
            "Xeon Sapphire Rapids · 2 vCPU · 24 GiB",
        ),
        (
            _fp(cpu={"flags": SPR_FLAGS, "signature": _sig(6, 143, 8)}),
            "Xeon Sapphire Rapids (AMX hidden) · 2 vCPU · 24 GiB",
        ),
        (
            _fp(cpu={"flags": SPR_FLAGS + AMX, "signature": _sig(6, 207, 2)}),
            "Xeon Emerald Rapids · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "flags": SPR_FLAGS + AMX + ["amx_fp16"],
                    "signature": _sig(6, 173, 1),
                }
            ),
            "Xeon Granite Rapids · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "signature": _sig(6, 106, 6),
                    "flags": ["avx2", "avx512f", "avx512_vnni", "avx512vbmi"],
                }
            ),
            "Xeon Ice Lake-SP · 2 vCPU · 24 GiB",
        ),
        (
            _fp(cpu={"signature": _sig(6, 85, 4), "flags": ["avx2", "avx512f"]}),
            "Xeon Skylake-SP · 2 vCPU · 24 GiB",
        ),
        (_fp(cpu={"signature": _sig(6, 85, 7)}), "Xeon Cascade Lake · 2 vCPU · 24 GiB"),
        (
            _fp(
                cpu={
                    "signature": _sig(6, 85, 11),
                    "flags": ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"],
                }
            ),
            "Xeon Cooper Lake · 2 vCPU · 24 GiB",
        ),
        # a signature the flags contradict gives way to the flags (Cooper Lake has no AVX-VNNI)
        (
            _fp(
                cpu={
                    "signature": _sig(6, 85, 11),
                    "flags": [
                        "avx2",
                        "avx512f",
                        "avx512_vnni",
                        "avx512_bf16",
                        "avx_vnni",
                    ],
                }
            ),
            "Xeon Sapphire Rapids+ (AMX hidden) · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "model": "AMD EPYC",
                    "vendor": "AuthenticAMD",
                    "signature": _sig(25, 0x11, 1),
                    "flags": ["avx2", "avx512f", "avx512_bf16"],
                }
            ),
            "EPYC Zen 4 · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "model": "AMD EPYC",
                    "vendor": "AuthenticAMD",
                    "signature": _sig(25, 0x01, 1),
                    "flags": ["avx2"],
                }
            ),
            "EPYC Zen 3 · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "model": "AMD EPYC",
                    "vendor": "AuthenticAMD",
                    "signature": _sig(25, 0x01, 1),
                    "flags": ["avx2", "avx512f"],
                }
            ),
            "EPYC Zen 4 · 2 vCPU · 24 GiB",
        ),  # Zen 3 has no AVX-512: the flags win
        (
            _fp(
                cpu={
                    "model": "AMD EPYC",
                    "vendor": "AuthenticAMD",
                    "signature": _sig(26, 2, 1),
                    "flags": ["avx2", "avx512f", "avx_vnni"],
                }
            ),
            "EPYC Zen 5 · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "model": "AMD EPYC",
                    "vendor": "AuthenticAMD",
                    "signature": _sig(23, 0x31, 0),
                    "flags": ["avx2"],
                }
            ),
            "EPYC Zen 2 · 2 vCPU · 24 GiB",
        ),
        (
            _fp(
                cpu={
                    "model": "aarch64",
                    "vendor": None,
                    "signature": {"implementer": 0x41, "part": 0xD4F},
                    "flags": ["asimd", "sve2"],
                    "logical_cores": 64,
                    "hypervisor": False,
                },
                memory_bytes=256 << 30,
            ),
            "Neoverse V2 · 64 cores · 256 GiB",
        ),
    ],
)
def test_derived_labels(fp, label):
    assert hostlabel.derived_label(fp) == label


@pytest.mark.parametrize(
    "gpu,label",
    [
        (
            {"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984},
            "H100 HBM3 · 80 GiB",
        ),
        ({"name": "NVIDIA H200", "memory_bytes": 150754820096}, "H200 · 140 GiB"),
        (
            {"name": "NVIDIA A100-SXM4-80GB", "memory_bytes": 85899345920},
            "A100-SXM4 · 80 GiB",
        ),
        ({"name": "NVIDIA GeForce RTX 4090"}, "GeForce RTX 4090"),
    ],
)
def test_device_labels_read_alike(gpu, label):
    assert hostlabel.device_label(gpu) == label


def test_alike_hosts_are_told_apart_by_the_fact_that_differs():
    a = _fp(cpu={"cache": {"L3": "491520K", "L2": "2048K"}}, name="vm")
    b = _fp(cpu={"cache": {"L3": "266240K", "L2": "2048K"}}, name="vm")
    assert hostlabel.resolve({"vm-aaaa1111": a, "vm-bbbb2222": b}) == {
        "vm-aaaa1111": "Xeon Cascade Lake · 2 vCPU · 24 GiB · L3 480 MiB",
        "vm-bbbb2222": "Xeon Cascade Lake · 2 vCPU · 24 GiB · L3 260 MiB",
    }
    # a specific model string says nothing of AMX: the flag tells them apart, first
    plat = {"model": "Intel(R) Xeon(R) Platinum 8480+", "cache": {"L3": "107520K"}}
    amx = _fp(
        cpu={**plat, "flags": SPR_FLAGS + AMX, "cache": {"L3": "491520K"}}, name="vm"
    )
    hidden = _fp(cpu={**plat, "flags": SPR_FLAGS}, name="vm")
    assert hostlabel.resolve({"vm-1": amx, "vm-2": hidden}) == {
        "vm-1": "Xeon Platinum 8480+ · 2 vCPU · 24 GiB · AMX",
        "vm-2": "Xeon Platinum 8480+ · 2 vCPU · 24 GiB · no AMX",
    }
    # the same hardware under two names: the names; nothing else differs: the ids
    assert hostlabel.resolve({"a-1": _fp(name="a"), "b-1": _fp(name="b")}) == {
        "a-1": "Xeon Cascade Lake · 2 vCPU · 24 GiB · a",
        "b-1": "Xeon Cascade Lake · 2 vCPU · 24 GiB · b",
    }
    got = hostlabel.resolve({"vm-94ba7631": _fp(), "golden-host-94ba7631": _fp()})
    assert len(set(got.values())) == 2


def test_a_configured_label_wins_and_a_host_without_one_keeps_its_derived_label():
    got = hostlabel.resolve(
        {"vm-aaaa1111": _fp(), "gpu-1": _fp(gpus=[{"name": "NVIDIA H100 80GB HBM3"}])},
        {"vm-aaaa1111": "Dev VM"},
    )
    assert got == {"vm-aaaa1111": "Dev VM", "gpu-1": "H100 HBM3"}


def test_a_colliding_label_is_one_line_naming_both_hosts():
    with pytest.raises(ConfigError) as e:
        hostlabel.resolve(
            {"vm-a": _fp(), "gpu-1": _fp(gpus=[{"name": "NVIDIA H100 80GB HBM3"}])},
            {"vm-a": "H100 HBM3"},
        )
    msg = str(e.value)
    assert "\n" not in msg and "vm-a" in msg and "gpu-1" in msg and "hosts.yaml" in msg
    with pytest.raises(ConfigError) as e:  # two configured labels alike
        hostlabel.check_labels({"vm-a": "Box", "vm-b": "box"}, "data/hosts.yaml")
    assert "vm-a" in str(e.value) and "vm-b" in str(e.value)


@pytest.mark.parametrize(
    "bad", [{"vm-a": ""}, {"vm-a": 3}, {"vm-a": "two\nlines"}, ["vm-a"]]
)
def test_bad_labels_name_the_field(bad):
    with pytest.raises(ConfigError) as e:
        hostlabel.check_labels(bad, "data/hosts.yaml")
    assert "host_labels" in str(e.value) and "\n" not in str(e.value)


def test_the_inventory_accepts_and_checks_host_labels(tmp_path, monkeypatch):
    p = tmp_path / "hosts.yaml"
    p.write_text("schema_version: 1\nhosts: {}\nhost_labels:\n  vm-0372cd29: Dev VM\n")
    assert inventory.load_inventory(p).host_labels == {"vm-0372cd29": "Dev VM"}
    p.write_text("schema_version: 1\nhosts: {}\nhost_labels:\n  vm-0372cd29: ''\n")
    with pytest.raises(ConfigError, match="host_labels.vm-0372cd29"):
        inventory.load_inventory(p)
    # the pages read the same file (ALMANAC_DATA)
    p.write_text("schema_version: 1\nhosts: {}\nhost_labels:\n  vm-0372cd29: Dev VM\n")
    monkeypatch.setenv("ALMANAC_DATA", str(tmp_path))
    recs = committed_runs()
    assert hostnames.label(recs, "vm-0372cd29") == "Dev VM"
    assert hostnames.label(recs, "lent-h100-920a23c0") == "H100 HBM3 · 80 GiB"


class _Doc:
    def __init__(self, host_id: str, fp: dict, created: str = "2026-11-01T00:00:00"):
        self.host_id, self.host, self.created = host_id, fp, created


class _Set:
    """A build's loaded set as pipelines.hostnames reads it: its runs and host artifacts."""

    def __init__(self, runs: list[_Doc]):
        self.runs, self.hosts, self._derived = runs, [], {}

    def derived(self, name, compute):
        if name not in self._derived:
            self._derived[name] = compute(self)
        return self._derived[name]


def test_during_a_build_a_host_has_its_label_among_the_whole_set_on_every_page(
    monkeypatch, tmp_path
):
    """A page showing one host's runs names it as the pages showing the fleet do: told apart from its
    twins elsewhere in the set, not only among the page's own artifacts."""
    from pipelines import dataset

    monkeypatch.setenv("ALMANAC_DATA", str(tmp_path))  # no hosts.yaml: derived labels
    a, b = _Doc("a-1", _fp(name="a")), _Doc("b-1", _fp(name="b"))
    c = _Doc("c-1", _fp(name="c", memory_bytes=64 << 30))
    alone = "Xeon Cascade Lake · 2 vCPU · 24 GiB"
    # outside a build, the artifacts given are the set
    assert hostnames.labels([a]) == {"a-1": alone}
    assert hostnames.labels([a, b]) == {"a-1": f"{alone} · a", "b-1": f"{alone} · b"}
    monkeypatch.setattr(dataset, "building", lambda: _Set([a, b]))
    assert hostnames.labels([a]) == {"a-1": f"{alone} · a"}  # one host's page
    assert hostnames.labels([b, b]) == {"b-1": f"{alone} · b"}
    # a host the set does not hold: labelled among the set's hosts and the page's
    assert hostnames.labels([c]) == {"c-1": "Xeon Cascade Lake · 2 vCPU · 64 GiB"}
    assert (
        hostnames.label([a], "b-1") == "b-1"
    )  # only the page's hosts are in its labels
