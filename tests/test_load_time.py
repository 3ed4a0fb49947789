"""Load time between builds and with weight repacking off and on (pipelines.load_time, the Comparisons
page's section; seed 001 "Parallel Tensor Repacking"). Records are a committed fixture run rewritten to
known load times, so each ratio can be checked by hand."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from core import stats
from core.records import run as record
from pipelines import load_time as lt
from pipelines.site import load_time as page

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = (
    ROOT
    / "tests/fixtures/data/runs/golden-host-55ecea05/gemma3-270m-q4-k-m"
    / "pp64--688032f1cc1e51e0-20261126T023400Z.json"
)
BUILDS = {
    "0.3.34": ("llama-cpp-python 0.3.34", "e3546c794"),
    "0.3.36": ("llama-cpp-python 0.3.36", "0c1e57098"),
}


def _run(
    i: int, build: str, repack: bool, load_s: float, jitter: float = 1.0
) -> record.RunRecord:
    doc = copy.deepcopy(record.read(TEMPLATE).doc)
    created = datetime.fromisoformat(doc["created"]) + timedelta(minutes=i)
    version, commit = BUILDS[build]
    doc["build"].update(backend_version=version, llama_cpp_commit=commit)
    doc["matrix"]["name"] = lt.MATRIX
    doc["settings"]["requested"]["extra_bufts"] = repack
    doc["key"] = record.digest([build, repack, "load-time"])
    doc["created"] = created.isoformat()
    doc["id"] = record.run_id(doc["key"], created)
    doc["summary"]["load_time_s"] = stats.summarize([load_s])
    # the headline varies from run to run as real runs do (the host's run-to-run noise rests on it)
    tps = doc["summary"]["tokens_per_second"]
    for k in ("mean", "median", "ci95_low", "ci95_high"):
        if isinstance(tps.get(k), (int, float)):
            tps[k] *= jitter
    return record.RunRecord(doc, f"data/runs/{doc['id']}.json")


def _runs() -> list[record.RunRecord]:
    out, i = [], 0
    # three runs each; repack on: 0.3.34 loads in ~2.0 s, 0.3.36 in ~1.0 s (twice as fast); off: ~0.5 s both
    for build, on, off in (("0.3.34", 2.0, 0.5), ("0.3.36", 1.0, 0.5)):
        for jitter in (0.98, 1.0, 1.02):
            out.append(_run(i, build, True, on * jitter, jitter))
            out.append(_run(i + 1, build, False, off * jitter, jitter))
            i += 2
    return out


def test_build_change_and_repack_pairs_with_their_speedups():
    ps = lt.pairs(_runs())
    builds = [p for p in ps if p.kind == "build"]
    repack = [p for p in ps if p.kind == "repack"]
    assert sorted(p.repack for p in builds) == ["off", "on"]
    on = next(p for p in builds if p.repack == "on")
    assert "0.3.34" in on.before_label and "0.3.36" in on.after_label
    sp, lo, hi = on.speedup
    assert sp == pytest.approx(2.0, rel=1e-6) and lo < 2.0 < hi
    assert on.verdict == "faster"
    off = next(p for p in builds if p.repack == "off")
    assert off.speedup[0] == pytest.approx(1.0) and off.verdict == "within noise"
    assert len(repack) == 2  # one per build: off (0.5 s) against on (2.0 s, then 1.0 s)
    r34 = next(p for p in repack if "0.3.34" in p.build)
    assert r34.speedup[0] == pytest.approx(0.25) and r34.verdict == "slower"
    assert all(
        p.comparison.tested == 4 for p in ps
    )  # one family at the false discovery rate


def test_section_renders_both_tables_and_says_how_to_measure():
    md = page.section(_runs())
    assert "### Before and after a build change" in md
    assert "### Weight repacking off and on" in md
    assert "2.00× [" in md and "faster" in md
    assert "invoke bisect" in page.section([])
