"""Issue 27, "One truth per figure": a host is one machine (core.hostid), older data is split and
joined by it (core.rehost, the loader), and a set that puts two machines under one id is refused."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import artifacts, hostid, rehost
from core.errors import ArtifactErrors
from core.records import run as record
from tests.conftest import FIXTURES, ROOT

# Files exactly as the almanac before core.hostid wrote them (git show 96ed0af:data/...): the VM
# "vm-568ab3c6" was two machines, one with AMX and a 480 MiB L3, one without AMX and a 260 MiB L3.
LEGACY = FIXTURES / "legacy-hosts"
AMX_PROBE = LEGACY / "hosts" / "vm-568ab3c6" / "bandwidth-20261126T072358Z.json"
NOAMX_NOISE = LEGACY / "hosts" / "vm-568ab3c6" / "noise-20261126T163156Z.json"
AMX_RUN = (
    LEGACY
    / "runs"
    / "vm-568ab3c6"
    / "synthetic-llama-1b-q8-0"
    / "tg128--9af18624b6a6ff40-20261126T070237.281Z.json"
)
DECISION = (
    LEGACY
    / "decisions"
    / "vm-568ab3c6"
    / "prompt-lookup-vm-568ab3c6-20261126T175726Z.json"
)


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def _fresh_fingerprint(
    monkeypatch, *, flags: str, cache: dict, family=6, model=143, stepping=8
) -> dict:
    """runtime.hosts.fingerprint.fingerprint() on a fake machine (cpuinfo, caches, cores, memory)."""
    from runtime.hosts import fingerprint as fpmod

    info = {
        "vendor_id": "GenuineIntel",
        "model name": "Intel(R) Xeon(R) Processor",
        "cpu family": str(family),
        "model": str(model),
        "stepping": str(stepping),
        "flags": flags,
    }
    monkeypatch.setattr(fpmod, "_cpuinfo", lambda: dict(info))
    monkeypatch.setattr(fpmod, "_cache_sizes", lambda: dict(cache))
    monkeypatch.setattr(fpmod, "_numa_nodes", lambda: 1)
    monkeypatch.setattr(fpmod, "gpus", lambda: [])
    monkeypatch.setattr(fpmod.psutil, "cpu_count", lambda logical=True: 2)
    monkeypatch.setattr(fpmod.psutil, "cpu_freq", lambda: None)

    class Mem:
        total = 25275879424  # what the VM recorded (24105 MiB)

    monkeypatch.setattr(fpmod.psutil, "virtual_memory", lambda: Mem())
    monkeypatch.setenv("ALMANAC_HOST_NAME", "vm")
    return fpmod.fingerprint()


AMX_FLAGS = (
    "fpu sse4_2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512cd avx512dq avx512_vnni avx512_bf16 "
    "avx512vbmi avx512_vbmi2 avx512_bitalg avx512_vpopcntdq avx512ifma avx512_fp16 avx_vnni amx_tile amx_int8 "
    "amx_bf16 hypervisor"
)
AMX_CACHE = {"L1d": "48K", "L1i": "64K", "L2": "2048K", "L3": "491520K"}


# -- the identity rule ---------------------------------------------------------------------------


def test_the_id_hashes_what_tells_machines_apart():
    amx, noamx = _doc(AMX_PROBE)["host"], _doc(NOAMX_NOISE)["host"]
    assert (
        amx["id"] == noamx["id"] == "vm-568ab3c6"
    )  # the old rule: one id for two machines
    assert hostid.host_id(amx) != hostid.host_id(noamx)
    assert (
        hostid.host_id(amx).startswith("vm-")
        and len(hostid.host_id(amx)) == len("vm-") + 8
    )
    assert hostid.differing_fact(amx, noamx) == ("cpu.cache.L3", "491520K", "266240K")
    assert {f for f, _, _ in hostid.differing_facts(amx, noamx)} == {
        "cpu.cache.L3",
        "cpu.cache.L1i",
        "cpu.flags.amx_tile",
        "cpu.flags.amx_int8",
        "cpu.flags.amx_bf16",
    }
    # what changes on one machine is not a fact: the model string, clock, OS
    same = copy.deepcopy(amx)
    same["cpu"].update(model="Some Other Name", max_mhz=1)
    same["os"] = {"release": "7.0"}
    assert hostid.host_id(same) == hostid.host_id(amx)
    # every fact the brief names changes the id
    for change in (
        lambda f: f["cpu"]["cache"].update(L2="1024K"),
        lambda f: f["cpu"]["flags"].remove("avx512vbmi"),
        lambda f: f["cpu"].update(physical_cores=1),
        lambda f: f.update(numa_nodes=2),
        lambda f: f.update(memory_bytes=48 << 30),
        lambda f: f.update(gpus=[{"name": "NVIDIA H100"}]),
        lambda f: f["cpu"].update(signature={"family": 6, "model": 143, "stepping": 8}),
    ):
        other = copy.deepcopy(amx)
        change(other)
        assert hostid.host_id(other) != hostid.host_id(amx)


def test_a_fresh_fingerprint_records_the_signature_and_the_longer_flag_list(
    monkeypatch,
):
    fp = _fresh_fingerprint(monkeypatch, flags=AMX_FLAGS, cache=AMX_CACHE)
    assert fp["id_scheme"] == hostid.SCHEME == 2
    assert fp["cpu"]["signature"] == {"family": 6, "model": 143, "stepping": 8}
    assert {
        "avx512_fp16",
        "avx512_vbmi2",
        "avx512_bitalg",
        "avx512_vpopcntdq",
        "avx512ifma",
        "amx_tile",
    } <= set(fp["cpu"]["flags"])
    assert "hypervisor" not in fp["cpu"]["flags"] and fp["cpu"]["hypervisor"] is True
    assert fp["id"] == hostid.host_id(fp)
    facts = hostid.identity_facts(fp)
    assert (
        facts["cpu.signature.model"] == 143 and facts["cpu.flags.avx512_fp16"] is True
    )
    assert facts["memory_gib"] == 24 and facts["gpus"] == []


def test_arm_signature_from_cpuinfo():
    from runtime.hosts.fingerprint import signature

    assert signature(
        {
            "CPU implementer": "0x41",
            "CPU architecture": "8",
            "CPU variant": "0x0",
            "CPU part": "0xd4f",
            "CPU revision": "1",
        }
    ) == {
        "implementer": 0x41,
        "architecture": 8,
        "variant": 0,
        "part": 0xD4F,
        "revision": 1,
    }
    assert signature({"cpu family": "6", "model": "143", "stepping": "unknown"}) == {
        "family": 6,
        "model": 143,
    }


def test_an_older_fingerprint_is_compared_on_the_facts_both_record(monkeypatch):
    old = _doc(AMX_PROBE)["host"]
    new = _fresh_fingerprint(monkeypatch, flags=AMX_FLAGS, cache=AMX_CACHE)
    assert hostid.scheme(old) == 1 and hostid.scheme(new) == 2
    # the new one records more (signature, avx512_fp16 ...): not a difference, the old one never said
    assert hostid.differing_fact(old, new) is None and hostid.same_machine(old, new)
    assert hostid.host_id(old) != new["id"]
    noamx = _doc(NOAMX_NOISE)["host"]
    assert hostid.differing_fact(noamx, new) == ("cpu.cache.L3", "266240K", "491520K")


def test_cache_levels_named_in_any_text_are_ordered_without_error():
    """A cache level's name is the artifact's, any text: "³" is a digit to str.isdigit but not to int
    (the property test's explore run found it), and a name of a thousand digits is no number to read."""
    fp = copy.deepcopy(_doc(AMX_PROBE)["host"])
    fp["cpu"]["cache"] = {"L³": "1K", "L3": "491520K", "9" * 5000: "2K", "L1d": "48K"}
    facts = hostid.identity_facts(fp)
    levels = [k.removeprefix("cpu.cache.") for k in facts if k.startswith("cpu.cache.")]
    assert levels[0] == "9" * 5000 and levels[1:] == ["L3", "L1d", "L³"]
    other = copy.deepcopy(fp)
    other["cpu"]["cache"]["L³"] = "2K"
    assert hostid.differing_fact(fp, other) == ("cpu.cache.L³", "1K", "2K")


# -- the loader: one host id, one machine; an older host joined to the newer one ------------------


def _folder(tmp_path: Path, *files: Path) -> Path:
    root = tmp_path / "data"
    for f in files:
        dst = root / f.relative_to(LEGACY)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst)
    return root


def test_two_machines_under_one_id_are_refused_in_one_line(tmp_path):
    root = _folder(tmp_path, AMX_PROBE, NOAMX_NOISE)
    count, problems = artifacts.validate_tree(root)
    assert count == 2 and len(problems) == 1
    line = problems[0]
    assert "\n" not in line
    assert line.startswith(
        f"{_rel(root / 'hosts/vm-568ab3c6/bandwidth-20261126T072358Z.json')} and "
        f"{_rel(root / 'hosts/vm-568ab3c6/noise-20261126T163156Z.json')} claim host vm-568ab3c6 "
        "but differ in cpu.cache.L3: 491520K vs 266240K"
    )
    with pytest.raises(ArtifactErrors) as e:
        artifacts.load_all(root)
    assert e.value.problems == problems
    from core.records.base import read_all
    from core.records.host import HostRecord

    with pytest.raises(
        ArtifactErrors
    ):  # the per-folder readers read a set the same way
        read_all(HostRecord, root)


def _rel(p: Path) -> str:
    from core.paths import relpath

    return relpath(p)


def test_invoke_validate_and_the_site_build_refuse_it(tmp_path):
    root = _folder(tmp_path, AMX_PROBE, NOAMX_NOISE)
    env = {"ALMANAC_DATA": str(root), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "validate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        "claim host vm-568ab3c6 but differ in cpu.cache.L3: 491520K vs 266240K"
        in proc.stderr
    )
    from pipelines import dataset

    with pytest.raises(ArtifactErrors) as e:
        dataset.load(root)
    assert "claim host vm-568ab3c6" in e.value.problems[0]
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == sorted(
        [AMX_PROBE.name, NOAMX_NOISE.name]
    )


def _new_run(monkeypatch, old: dict, fp: dict) -> dict:
    """The old run measured again on a machine fingerprinted by this version."""
    doc = artifacts.upgrade(copy.deepcopy(old))
    doc["host"] = fp
    # now (the old run is older): never ahead of the clock, which validation refuses
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    doc["created"] = now.isoformat()
    r = record.RunRecord(doc)
    doc["key"] = record.config_key(
        r.backend, r.model_identity, r.requested, r.test, fp["id"], r.backend_version
    )
    doc["id"] = f"{doc['key'][:12]}-{now.strftime('%Y%m%dT%H%M%S')}.000Z"
    return doc


def test_artifacts_of_an_older_version_join_the_same_machine_measured_now(
    tmp_path, monkeypatch
):
    """A run as the previous version wrote it (its fingerprint has no signature and the shorter
    flag list) and a run of the same machine fingerprinted now are one host on load."""
    root = _folder(tmp_path, AMX_RUN, AMX_PROBE)
    fresh = _fresh_fingerprint(monkeypatch, flags=AMX_FLAGS, cache=AMX_CACHE)
    new = _new_run(monkeypatch, _doc(AMX_RUN), fresh)
    record.write(new, root / "runs")
    loaded = artifacts.load_all(root)
    assert {d["host"]["id"] for _, d in loaded} == {fresh["id"]}
    assert all(d["host"]["id"] == fresh["id"] for d in record.read_all(root / "runs"))
    from pipelines import dataset

    ds = dataset.load(root)
    assert {r.host_id for r in ds.runs} | {h.host_id for h in ds.hosts} == {fresh["id"]}
    # the files are not rewritten
    assert _doc(root / AMX_RUN.relative_to(LEGACY))["host"]["id"] == "vm-568ab3c6"


def test_an_older_host_joins_only_the_one_machine_it_agrees_with(tmp_path, monkeypatch):
    # a different machine measured now (no AMX): the older AMX run keeps its own id
    root = _folder(tmp_path, AMX_RUN)
    other = _fresh_fingerprint(
        monkeypatch,
        flags=AMX_FLAGS.replace("amx_tile amx_int8 amx_bf16 ", ""),
        cache={**AMX_CACHE, "L1i": "32K", "L3": "266240K"},
    )
    record.write(_new_run(monkeypatch, _doc(AMX_RUN), other), root / "runs")
    assert sorted({d["host"]["id"] for _, d in artifacts.load_all(root)}) == sorted(
        {"vm-568ab3c6", other["id"]}
    )
    # two newer machines that differ only in what the older fingerprint never recorded: ambiguous, kept apart
    root2 = _folder(tmp_path / "b", AMX_RUN)
    a = _fresh_fingerprint(monkeypatch, flags=AMX_FLAGS, cache=AMX_CACHE, stepping=8)
    b = _fresh_fingerprint(monkeypatch, flags=AMX_FLAGS, cache=AMX_CACHE, stepping=7)
    for fp in (a, b):
        doc = _new_run(monkeypatch, _doc(AMX_RUN), fp)
        record.write(doc, root2 / "runs")
    assert sorted({d["host"]["id"] for _, d in artifacts.load_all(root2)}) == sorted(
        {"vm-568ab3c6", a["id"], b["id"]}
    )


def test_a_decision_follows_its_older_host_when_that_joins(tmp_path, monkeypatch):
    root = _folder(tmp_path, AMX_RUN)
    decision = _doc(DECISION)
    (root / "decisions" / "vm-568ab3c6").mkdir(parents=True)
    (root / "decisions" / "vm-568ab3c6" / DECISION.name).write_text(
        json.dumps(decision)
    )
    fresh = _fresh_fingerprint(monkeypatch, flags=AMX_FLAGS, cache=AMX_CACHE)
    record.write(_new_run(monkeypatch, _doc(AMX_RUN), fresh), root / "runs")
    docs = {d["artifact"]: d for _, d in artifacts.load_all(root)}
    assert docs["decision"]["host_id"] == fresh["id"]


# -- the migration -------------------------------------------------------------------------------


def test_reidentify_splits_a_shared_id_and_keeps_each_file_as_it_was_otherwise(
    tmp_path,
):
    root = _folder(tmp_path, AMX_PROBE, NOAMX_NOISE, AMX_RUN, DECISION)
    before = {p.relative_to(root).as_posix(): _doc(p) for p in root.rglob("*.json")}
    plan = rehost.plan(root)
    amx_id, noamx_id = (
        hostid.host_id(_doc(AMX_PROBE)["host"]),
        hostid.host_id(_doc(NOAMX_NOISE)["host"]),
    )
    assert (
        plan.hosts == {"vm-568ab3c6": {amx_id, noamx_id}} and plan.splits == plan.hosts
    )
    assert any(
        "decisions/vm-568ab3c6" in n and "left as it is" in n for n in plan.notes
    )
    assert sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*.json")
    ) == sorted(before)  # a plan writes nothing
    rehost.apply(plan)
    after = {p.relative_to(root).as_posix(): _doc(p) for p in root.rglob("*.json")}
    assert f"hosts/{amx_id}/bandwidth-20261126T072358Z.json" in after
    assert f"hosts/{noamx_id}/noise-20261126T163156Z.json" in after
    run_path = next(
        p
        for p in after
        if p.startswith(f"runs/{amx_id}/synthetic-llama-1b-q8-0/tg128--")
    )
    run = after[run_path]
    old = before[
        "runs/vm-568ab3c6/synthetic-llama-1b-q8-0/tg128--9af18624b6a6ff40-20261126T070237.281Z.json"
    ]
    # the id stays (links hold); the key is the configuration's key with the new host id, exactly
    assert (
        run["id"] == old["id"]
        and run["host"]["id"] == amx_id
        and run["key"] != old["key"]
    )
    r = record.RunRecord(artifacts.upgrade(copy.deepcopy(run)))
    assert (
        record.config_key(
            r.backend, r.model_identity, r.requested, r.test, amx_id, r.backend_version
        )
        == run["key"]
    )
    assert run_path.endswith(f"tg128--{run['key'][:16]}-20261126T070237.281Z.json")
    # nothing else changed: not the schema version, not the fingerprint's facts
    assert run["schema_version"] == old["schema_version"] == 1
    assert {k: v for k, v in run.items() if k not in ("host", "key")} == {
        k: v for k, v in old.items() if k not in ("host", "key")
    }
    assert {k: v for k, v in run["host"].items() if k != "id"} == {
        k: v for k, v in old["host"].items() if k != "id"
    }
    assert (
        "id_scheme" not in run["host"]
    )  # still an older fingerprint: it joins a newer one of its machine
    # the folder is valid now, and a second pass changes nothing
    assert artifacts.validate_tree(root)[1] == []
    again = rehost.plan(root)
    assert again.moves == [] and again.hosts == {amx_id: {amx_id}, noamx_id: {noamx_id}}


def test_reidentify_moves_decisions_with_what_they_rest_on_and_renames_labels(tmp_path):
    root = _folder(tmp_path, AMX_RUN)
    run = _doc(AMX_RUN)
    decision = _doc(DECISION)
    decision["gates"][0]["evidence"] = {"baseline": run["id"], "candidate": run["id"]}
    (root / "decisions" / "vm-568ab3c6").mkdir(parents=True)
    (root / "decisions" / "vm-568ab3c6" / DECISION.name).write_text(
        json.dumps(decision)
    )
    (root / "hosts.yaml").write_text(
        "schema_version: 1\nhosts: {}\n# a comment stays\nhost_labels:\n  vm-568ab3c6: Dev VM\n"
    )
    plan = rehost.reidentify(root)
    new = hostid.host_id(run["host"])
    moved = _doc(root / "decisions" / new / DECISION.name)
    assert moved["host_id"] == new and moved["id"] == decision["id"]
    assert (
        (root / "hosts.yaml")
        .read_text()
        .endswith(f"# a comment stays\nhost_labels:\n  {new}: Dev VM\n")
    )
    assert (
        not (root / "decisions" / "vm-568ab3c6").exists()
        and not (root / "runs" / "vm-568ab3c6").exists()
    )
    assert plan.summary()[0] == f"vm-568ab3c6 -> {new}"


def test_reidentify_refuses_a_bad_set_and_writes_nothing(tmp_path):
    root = _folder(tmp_path, AMX_PROBE, NOAMX_NOISE)
    bad = root / "runs" / "broken.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{")
    with pytest.raises(ArtifactErrors) as e:
        rehost.reidentify(root)
    assert "broken.json" in e.value.lines()[0]
    assert (root / "hosts" / "vm-568ab3c6" / NOAMX_NOISE.name).is_file()


def test_the_committed_data_is_one_machine_per_host():
    """data/ as committed: no host id shared by two machines, every id the one its fingerprint gives
    (a newer almanac's or an older one's facts), and the two machines once called vm-568ab3c6 apart."""
    from tests.support.committed import committed_paths

    seen: dict[str, dict] = {}
    for p in (
        committed_paths("runs")
        + committed_paths("hosts")
        + committed_paths("quality")
        + committed_paths("perplexity")
    ):
        fp = _doc(p)["host"]
        assert fp["id"] == hostid.host_id(fp), p
        assert p.relative_to(ROOT / "data").parts[1] == fp["id"], p
        if fp["id"] in seen:
            assert hostid.differing_fact(seen[fp["id"]], fp) is None, p
        seen.setdefault(fp["id"], fp)
    assert "vm-568ab3c6" not in seen
    vms = {
        h: fp
        for h, fp in seen.items()
        if h.startswith("vm-") and "Xeon" in fp["cpu"]["model"]
    }
    assert len(vms) == 2
    assert sorted(fp["cpu"]["cache"]["L3"] for fp in vms.values()) == [
        "266240K",
        "491520K",
    ]


def test_invoke_host_reidentify_splits_an_older_folder_then_validate_accepts_it(
    tmp_path,
):
    root = _folder(tmp_path, AMX_PROBE, NOAMX_NOISE)
    env = {"ALMANAC_DATA": str(root), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}

    def invoke(*args):
        return subprocess.run(
            [sys.executable, "-m", "invoke", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    dry = invoke("host.reidentify", "--dry-run")
    amx_id, noamx_id = (
        hostid.host_id(_doc(AMX_PROBE)["host"]),
        hostid.host_id(_doc(NOAMX_NOISE)["host"]),
    )
    assert (
        dry.returncode == 0
        and f"vm-568ab3c6 -> {', '.join(sorted([amx_id, noamx_id]))}" in dry.stdout
    )
    assert (
        "dry run: nothing written" in dry.stdout
        and (root / "hosts" / "vm-568ab3c6").is_dir()
    )
    done = invoke("host.reidentify")
    assert (
        done.returncode == 0
        and "2 of 2 artifact files rewritten (2 moved)" in done.stdout
    )
    assert invoke("validate").stdout.strip() == "2 artifacts valid"
