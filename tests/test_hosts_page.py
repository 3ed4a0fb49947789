"""The Hosts page: the CPU host of the golden artifacts beside the H100 of the committed GPU
artifacts and a never-reached inventory host, with figures computed from the artifacts,
linked to them, and escaped."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from core import artifacts
from core.records.run import RunRecord
from pipelines import roofline
from pipelines.runs import load_runs
from pipelines.site import hosts as hosts_page
from pipelines.site.markdown import num, run_link
from runtime.execution import matrix
from runtime.hosts import inventory as hosts
from runtime.remote.failed import done_label, failed_artifacts
from tests.conftest import GOLDEN

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """The committed measurements only (not what a user's own runs added to data/)."""
    from tests.support.committed import committed_data

    return committed_data(tmp_path_factory.mktemp("committed") / "data")


@pytest.fixture(scope="module")
def gpu_runs(committed):
    docs = load_runs(committed / "runs")
    docs = [d for d in docs if d["host"]["id"].startswith("lent-h100-")]
    if not docs:
        pytest.skip("no committed H100 artifacts")
    return docs


@pytest.fixture(scope="module")
def gpu_hosts(committed):
    return roofline.load_hosts(committed / "hosts")


def test_side_by_side_cpu_gpu_and_inventory_host(
    gpu_runs, gpu_hosts, tmp_path, monkeypatch
):
    data = tmp_path / "data"
    (data / "matrices").mkdir(parents=True)
    (data / "models.yaml").write_text(
        "schema_version: 1\nmodels:\n  far-model:\n    path: /nowhere/far.gguf\n"
    )
    (data / "matrices" / "m.yaml").write_text(
        "schema_version: 1\nname: far\nmodels: [far-model]\ntests: [tg8]\n"
    )
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    evil = hosts.Host(
        name="evil", address="<script>alert(1)</script>", user="u", labels=["gpu"]
    )
    failed_artifacts(
        matrix=matrix.load(str(data / "matrices" / "m.yaml")),
        host=evil,
        kind="unreachable",
        message="evil: cannot connect",
        done=set(),
        reported_host=None,
        backend_versions={},
        log_tail="",
        wall_s=0.1,
    )
    far = load_runs(data / "runs")
    assert (
        far[0]["model"]["sha256"] is None
    )  # the file exists only on the host: unknown here, and said so
    cpu = load_runs(GOLDEN / "runs")
    md = hosts_page.hosts_page(cpu + gpu_runs + far, gpu_hosts)
    header = md.split("## Memory bandwidth")[0]
    for hid in ("golden-host-55ecea05", gpu_runs[0]["host"]["id"], "evil-inventory"):
        assert f"<code>{hid}</code>" in header
    assert "H100 HBM3 · 80 GiB · CC 9.0" in header and "580.159.04" in header
    assert "inventory only (never reached: hardware unknown)" in header
    assert "<script>" not in md
    bound_rows = [
        r for r in roofline.roofline_rows(gpu_runs, gpu_hosts) if r.get("bound")
    ]
    assert bound_rows and all(r["bound_by"] == "gpu" for r in bound_rows)
    for r in bound_rows:
        assert f"[{num(r['measured'], 1)}]({run_link(r['id'])})" in md
        assert f"{num(r['bound'], 0)} " in md
        assert 0.05 < r["efficiency"] < 1.0  # below the bound, as physics demands
    # the newest probe of the host is the one the page states (older ones are history)
    probe = max(
        (d for d in gpu_hosts if d["probe"]["kind"] == "gpu_memory_bandwidth"),
        key=lambda d: d["created"],
    )
    assert (
        f"<code>{probe['id']}</code>" in md
        and num(probe["bandwidth"][0]["summary"]["median"], 1) in md
    )


def test_decode_of_a_bigger_model_is_closer_to_its_bound(gpu_runs, gpu_hosts):
    """On the H100 the 8B shape (bandwidth-bound) reaches a larger share of the roofline than
    the 1B shape (launch-bound): the page's explanation must match the measurements."""
    rows = {
        (r["model"], r["test_name"]): r
        for r in roofline.roofline_rows(gpu_runs, gpu_hosts)
        if r.get("efficiency")
    }
    big = rows[("synthetic-llama-8b-q8_0", "tg128")]["efficiency"]
    small = rows[("synthetic-llama-1b-q8_0", "tg128")]["efficiency"]
    assert big > small + 0.15


def test_no_data_pages_say_what_to_run():
    md = hosts_page.hosts_page([], [])
    assert (
        "No hosts yet" in md
        and "No bandwidth probe yet" in md
        and "No bounded decode" in md
    )


def test_host_text_is_escaped():
    doc = json.loads(next((GOLDEN / "runs").rglob("*.json")).read_text())
    doc["host"] = dict(
        doc["host"],
        name="<img src=x onerror=alert(1)>",
        gpus=[{"name": "<b>gpu</b>", "driver": "{% raw %}", "memory_bytes": 1}],
    )
    md = hosts_page.host_table([RunRecord(doc)], [])
    assert "<img" not in md and "<b>gpu" not in md and "{%" not in md
    assert html.escape("<img src=x onerror=alert(1)>") in md.replace("\\", "")


def test_failed_inventory_artifact_validates(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "matrices").mkdir(parents=True)
    (data / "models.yaml").write_text(
        "schema_version: 1\nmodels:\n  x:\n    path: /nowhere/x.gguf\n"
    )
    (data / "matrices" / "m.yaml").write_text(
        "schema_version: 1\nname: m\nmodels: [x]\ntests: [tg8, pp8]\n"
    )
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    h = hosts.Host(name="box", address="10.0.0.9", user="u", port=2200, labels=["cpu"])
    m = matrix.load(str(data / "matrices" / "m.yaml"))
    paths = failed_artifacts(
        matrix=m,
        host=h,
        kind="refused",
        message="box: authentication refused",
        done={done_label("x", "tg8", {})},
        reported_host=None,
        backend_versions={},
        log_tail="t",
        wall_s=1.0,
    )
    assert len(paths) == 1  # tg8 was finished by the host; only pp8 is a failure
    doc = artifacts.load(paths[0])
    assert doc["test"]["name"] == "pp8" and doc["error"]["kind"] == "refused"
    assert doc["host"]["id"] == "box-inventory" and doc["host"]["port"] == 2200
    assert (
        doc["host"]["source"] == "inventory"
        and doc["build"]["backend_version"] == "unknown (host not reached)"
    )
    # an ok artifact may not drop its model hash
    bad = dict(doc, status="ok", error=None)
    with pytest.raises(Exception, match="sha256|None"):
        artifacts.validate(bad, "x")


def test_done_labels_take_list_valued_sweeps():
    """A sweep over adapter lists (lora_adapters: [a, b]) labels its points like any other: hashable, and
    the same whatever order the swept settings were reported in."""
    a = done_label("m", "tg8", {"lora_adapters": ["a", "b"], "n_threads": 1})
    assert a == done_label("m", "tg8", {"n_threads": 1, "lora_adapters": ["a", "b"]})
    assert a != done_label(
        "m", "tg8", {"lora_adapters": ["b", "a"], "n_threads": 1}
    )  # attach order matters
    assert len({a, done_label("m", "tg8", {})}) == 2
