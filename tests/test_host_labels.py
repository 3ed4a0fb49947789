"""Issue 19, item 3: hosts have names people read (core.hostlabel, pipelines.hostnames)."""

from __future__ import annotations

import re

import pytest

from core import hostlabel
from core.errors import ConfigError
from pipelines import hostnames
from runtime.hosts import inventory
from tests.support.committed import committed_runs


def _fp(**kw):
    cpu = {"model": "Intel(R) Xeon(R) Processor", "vendor": "GenuineIntel", "logical_cores": 2, "hypervisor": True,
           "flags": ["avx2", "avx512f", "avx512_vnni"]}
    cpu.update(kw.pop("cpu", {}))
    return {"id": "x", "cpu": cpu, "memory_bytes": 24 << 30, "gpus": [], **kw}


def test_committed_hosts_get_readable_distinct_labels():
    got = hostlabel.resolve(hostlabel.fingerprints(committed_runs()))
    assert got["lent-h100-5bc4e4f5"] == "H100 80 GB HBM3"  # the driver's name, vendor dropped, size spaced
    assert got["lent-h200-f4fc446f"] == "H200 · 140 GiB"  # the name gives no size: the memory does
    # a generic model string: the generation from the flags of the newest fingerprint
    assert re.fullmatch(r"Xeon [A-Z][\w -]+ · 2 vCPU · 24 GiB", got["vm-568ab3c6"])
    assert got["vm-94ba7631"] == "EPYC Zen 4 · 2 vCPU · 24 GiB"
    assert len(set(got.values())) == len(got)


@pytest.mark.parametrize("fp,label", [
    (_fp(), "Xeon Cascade Lake · 2 vCPU · 24 GiB"),  # the example
    (_fp(cpu={"flags": ["avx2", "avx512f"]}), "Xeon Skylake-SP · 2 vCPU · 24 GiB"),
    (_fp(cpu={"model": "AMD Ryzen 9 7950X 16-Core Processor", "vendor": "AuthenticAMD", "logical_cores": 32,
              "hypervisor": False}), "Ryzen 9 7950X · 32 cores · 24 GiB"),  # a specific model string is kept
    (_fp(gpus=[{"name": "NVIDIA H200", "memory_bytes": 150754820096}] * 2), "2× H200 · 140 GiB"),
    ({"id": "bare"}, "CPU"),  # nothing known: still a label
])
def test_derived_labels(fp, label):
    assert hostlabel.derived_label(fp) == label


def test_identical_hosts_are_told_apart_by_their_id():
    got = hostlabel.resolve({"vm-aaaa1111": _fp(), "vm-bbbb2222": _fp()})
    assert got == {"vm-aaaa1111": "Xeon Cascade Lake · 2 vCPU · 24 GiB · vm-aaaa1111",
                   "vm-bbbb2222": "Xeon Cascade Lake · 2 vCPU · 24 GiB · vm-bbbb2222"}
    # ids that end alike stay apart
    got = hostlabel.resolve({"vm-94ba7631": _fp(), "golden-host-94ba7631": _fp()})
    assert len(set(got.values())) == 2


def test_a_configured_label_wins_and_a_host_without_one_keeps_its_derived_label():
    got = hostlabel.resolve({"vm-aaaa1111": _fp(), "gpu-1": _fp(gpus=[{"name": "NVIDIA H100 80GB HBM3"}])},
                            {"vm-aaaa1111": "Dev VM"})
    assert got == {"vm-aaaa1111": "Dev VM", "gpu-1": "H100 80 GB HBM3"}


def test_a_colliding_label_is_one_line_naming_both_hosts():
    with pytest.raises(ConfigError) as e:
        hostlabel.resolve({"vm-a": _fp(), "gpu-1": _fp(gpus=[{"name": "NVIDIA H100 80GB HBM3"}])},
                          {"vm-a": "H100 80 GB HBM3"})
    msg = str(e.value)
    assert "\n" not in msg and "vm-a" in msg and "gpu-1" in msg and "hosts.yaml" in msg
    with pytest.raises(ConfigError) as e:  # two configured labels alike
        hostlabel.check_labels({"vm-a": "Box", "vm-b": "box"}, "data/hosts.yaml")
    assert "vm-a" in str(e.value) and "vm-b" in str(e.value)


@pytest.mark.parametrize("bad", [{"vm-a": ""}, {"vm-a": 3}, {"vm-a": "two\nlines"}, ["vm-a"]])
def test_bad_labels_name_the_field(bad):
    with pytest.raises(ConfigError) as e:
        hostlabel.check_labels(bad, "data/hosts.yaml")
    assert "host_labels" in str(e.value) and "\n" not in str(e.value)


def test_the_inventory_accepts_and_checks_host_labels(tmp_path, monkeypatch):
    p = tmp_path / "hosts.yaml"
    p.write_text("schema_version: 1\nhosts: {}\nhost_labels:\n  vm-568ab3c6: Dev VM\n")
    assert inventory.load_inventory(p).host_labels == {"vm-568ab3c6": "Dev VM"}
    p.write_text("schema_version: 1\nhosts: {}\nhost_labels:\n  vm-568ab3c6: ''\n")
    with pytest.raises(ConfigError, match="host_labels.vm-568ab3c6"):
        inventory.load_inventory(p)
    # the pages read the same file (ALMANAC_DATA)
    p.write_text("schema_version: 1\nhosts: {}\nhost_labels:\n  vm-568ab3c6: Dev VM\n")
    monkeypatch.setenv("ALMANAC_DATA", str(tmp_path))
    recs = committed_runs()
    assert hostnames.label(recs, "vm-568ab3c6") == "Dev VM"
    assert hostnames.label(recs, "lent-h100-5bc4e4f5") == "H100 80 GB HBM3"
