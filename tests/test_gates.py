"""Go/no-go gates (pipelines.gates): verdicts on known numbers, evidence found in artifacts,
decisions recorded once, bad catalogue input refused with the field."""

from __future__ import annotations

import pytest

from core import artifacts
from core.errors import ConfigError
from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines import gates as g
from pipelines import projections as proj
from tests.support.planning_fixtures import HOST, rate_test, requested, run_doc
from tests.support.quality_fixtures import base_settings, quality_doc


def gate(**kw):
    base = dict(
        id="x",
        name="x",
        concern="overhead",
        quantity="ratio",
        metric="tokens_per_second",
        model="m",
        test="tg128",
        direction="higher",
        target=0.95,
        no_go=0.8,
    )
    base.update(kw)
    return g.Gate(**base)


def test_verdicts_higher_is_better():
    gt = gate()
    assert g.gate_verdict(gt, 1.0, 0.96, 1.04)[0] == "GO"
    assert g.gate_verdict(gt, 0.7, 0.6, 0.79)[0] == "NO-GO"
    v, why = g.gate_verdict(gt, 0.9, 0.85, 0.93)
    assert v == "UNDECIDED" and "between" in why
    v, why = g.gate_verdict(gt, 0.96, 0.9, 1.02)
    assert v == "UNDECIDED" and "straddles the target" in why
    assert g.gate_verdict(gt, 0.8, 0.75, 0.85)[1].startswith(
        "the CI95 straddles the no-go"
    )
    assert g.gate_verdict(gt, None, None, None)[0] == "NOT MEASURED"
    # an exact value is its own interval
    v, why = g.gate_verdict(
        gate(quantity="text_agreement", metric=None, target=1.0, no_go=1.0),
        1.0,
        None,
        None,
    )
    assert v == "GO" and why.startswith("the value")
    assert (
        g.gate_verdict(
            gate(quantity="text_agreement", metric=None, target=1.0, no_go=1.0),
            0.97,
            None,
            None,
        )[0]
        == "NO-GO"
    )


def test_verdicts_lower_is_better():
    gt = gate(
        quantity="kv_cache_ratio", metric=None, direction="lower", target=0.6, no_go=0.9
    )
    assert g.gate_verdict(gt, 0.53, None, None)[0] == "GO"
    assert g.gate_verdict(gt, 0.95, None, None)[0] == "NO-GO"
    assert g.gate_verdict(gt, 0.7, None, None)[0] == "UNDECIDED"


def test_decision_rule():
    r = lambda v: g.GateResult(gate(), v, "")  # noqa: E731
    assert g.decision([r("GO"), r("GO")]) == "GO"
    assert g.decision([r("GO"), r("NO-GO"), r("UNDECIDED")]) == "NO-GO"
    assert g.decision([r("GO"), r("UNDECIDED")]) == "UNDECIDED"
    assert g.decision([r("NOT MEASURED")]) == "NOT MEASURED"


def test_paired_difference_known_tables():
    same = g.paired_difference([(True, True)] * 40 + [(False, False)] * 40)
    assert (
        same["delta"] == 0 and same["ci95"][0] < 0 < same["ci95"][1]
    )  # never a zero-width interval
    assert same["ci95"][1] < 0.05  # 80 unchanged items bound a change to a few points
    worse = g.paired_difference(
        [(True, False)] * 10 + [(True, True)] * 30 + [(False, False)] * 40
    )
    assert (
        worse["delta"] == pytest.approx(-0.125)
        and worse["lost"] == 10
        and worse["ci95"][1] < 0
    )


def test_welch_difference_known():
    d, lo, hi = g.welch_difference([10.0, 11.0, 12.0], [20.0, 21.0, 22.0])
    assert d == pytest.approx(10.0) and lo < 10 < hi and lo > 7


def test_gate_inputs_are_checked():
    with pytest.raises(ValueError, match="needs metric"):
        gate(metric=None)
    with pytest.raises(ValueError, match="no_go <= target"):
        gate(no_go=1.2)
    with pytest.raises(ValueError, match="needs suite and prompt_style"):
        gate(quantity="quality_delta", test=None)


def test_catalogue_refuses_a_bad_gate_naming_the_field(tmp_path):
    cat = tmp_path / "optimizations.yaml"
    cat.write_text("""schema_version: 1
optimizations:
  - id: kv
    name: KV
    effect: {metric: tokens_per_second, stage: decode, factor: 1.1}
    source: {kind: model, ref: x}
    settings: {type_k: q8_0}
    gates:
      - {id: g, name: g, concern: overhead, quantity: ratio, model: m, test: tg128, direction: higher,
         target: 1, no_go: 0.8}
""")
    with pytest.raises(ConfigError, match=r"optimizations\.0\.gates\.0.*needs metric"):
        proj.load_catalogue(cat)


def _pair(q8_rates, f16_rates, kv_f16=29.0, kv_q8=15.4):
    test = rate_test(n_gen=128, n_depth=4096)
    base = run_doc(
        test=test,
        metrics={"tokens_per_second": f16_rates},
        matrix="projections",
        settings=requested(type_k="f16", type_v="f16"),
        samples={"ts": f16_rates},
        effective={"llama_memory_mib": {"kv": {"CPU": kv_f16}}},
    )
    cand = run_doc(
        test=test,
        metrics={"tokens_per_second": q8_rates},
        matrix="projections",
        settings=requested(type_k="q8_0", type_v="q8_0"),
        samples={"ts": q8_rates},
        effective={"llama_memory_mib": {"kv": {"CPU": kv_q8}}},
        created="2026-01-02T00:00:00+00:00",
    )
    return [RunRecord(base), RunRecord(cand)]


def _kv_catalogue():
    return proj.Catalogue.model_validate(
        {
            "optimizations": [
                {
                    "id": "kv",
                    "name": "KV q8_0",
                    "effect": {
                        "metric": "tokens_per_second",
                        "stage": "decode",
                        "factor": 1.1,
                    },
                    "source": {"kind": "model", "ref": "x"},
                    "settings": {"type_k": "q8_0", "type_v": "q8_0"},
                    "gates": [
                        {
                            "id": "overhead",
                            "name": "decode",
                            "concern": "overhead",
                            "quantity": "ratio",
                            "metric": "tokens_per_second",
                            "model": "gemma3-270m-q4_k_m",
                            "test": "tg128@d4096",
                            "matrix": "projections",
                            "baseline": {"type_k": "f16", "type_v": "f16"},
                            "direction": "higher",
                            "target": 0.95,
                            "no_go": 0.8,
                        },
                        {
                            "id": "memory",
                            "name": "kv",
                            "concern": "memory",
                            "quantity": "kv_cache_ratio",
                            "model": "gemma3-270m-q4_k_m",
                            "test": "tg128@d4096",
                            "baseline": {"type_k": "f16", "type_v": "f16"},
                            "direction": "lower",
                            "target": 0.6,
                            "no_go": 0.9,
                        },
                        {
                            "id": "quality",
                            "name": "mc",
                            "concern": "quality",
                            "quantity": "quality_delta",
                            "model": "gemma3-270m-q4_k_m",
                            "suite": "basic_facts",
                            "prompt_style": "loglikelihood",
                            "baseline": {"type_k": "f16", "type_v": "f16"},
                            "direction": "higher",
                            "target": -0.05,
                            "no_go": -0.10,
                        },
                    ],
                }
            ]
        }
    )


def _quality(cand_verdicts, base_verdicts):
    def doc(verdicts, **kv):
        d = quality_doc(
            "gemma3-270m-q4_k_m",
            "basic_facts",
            verdicts,
            settings=base_settings(**kv),
            stamp="20260102T000000Z"
            if kv.get("type_k") == "q8_0"
            else "20260101T000000Z",
        ).doc
        d["prompt_style"] = "loglikelihood"
        d["host"] = dict(HOST)
        artifacts.validate(d)
        return QualityRecord(d)

    return [
        doc(base_verdicts, type_k="f16", type_v="f16"),
        doc(cand_verdicts, type_k="q8_0", type_v="q8_0"),
    ]


def test_gates_measured_from_artifacts():
    runs = _pair([50.0, 50.5, 49.5, 50.2], [50.0, 49.8, 50.3, 50.1])
    q = _quality([True] * 70 + [False] * 10, [True] * 72 + [False] * 8)
    (og,) = g.evaluate(_kv_catalogue(), runs, q, HOST["id"])
    res = {r.gate.id: r for r in og.results}
    assert res["overhead"].verdict == "GO" and res["overhead"].value == pytest.approx(
        1.0, abs=0.01
    )
    assert res["overhead"].evidence == {
        "candidate": runs[1]["id"],
        "baseline": runs[0]["id"],
    }
    assert (
        res["memory"].exact
        and res["memory"].value == pytest.approx(15.4 / 29.0)
        and res["memory"].verdict == "GO"
    )
    assert (
        res["quality"].value == pytest.approx(-2 / 80)
        and res["quality"].evidence["lost"] == 2
    )
    assert res["quality"].verdict in ("GO", "UNDECIDED")
    assert og.decision in ("GO", "UNDECIDED")


def test_a_slow_candidate_is_no_go_and_the_decision_is_recorded_once(tmp_path):
    runs = _pair([30.0, 30.2, 29.8, 30.1], [50.0, 49.8, 50.3, 50.1])
    cat = _kv_catalogue()
    (og,) = g.evaluate(cat, runs, [], HOST["id"])
    assert og.decision == "NO-GO"
    assert {r.gate.id: r.verdict for r in og.results} == {
        "overhead": "NO-GO",
        "memory": "GO",
        "quality": "NOT MEASURED",
    }
    cfile = tmp_path / "optimizations.yaml"
    cfile.write_text("x")
    paths = g.write_decisions(
        cat, runs, [], catalogue_file=cfile, root=tmp_path / "decisions"
    )
    assert len(paths) == 1
    doc = artifacts.load(paths[0])  # schema-valid
    assert (
        doc["decision"] == "NO-GO"
        and doc["gates"][0]["evidence"]["candidate"] == runs[1]["id"]
    )
    assert doc["gates"][0]["ci95_high"] < 0.8
    assert (
        g.write_decisions(
            cat, runs, [], catalogue_file=cfile, root=tmp_path / "decisions"
        )
        == []
    )  # unchanged
    faster = _pair([49.0, 49.5, 49.2, 49.4], [50.0, 49.8, 50.3, 50.1])
    again = g.write_decisions(
        cat, faster, [], catalogue_file=cfile, root=tmp_path / "decisions"
    )
    assert len(again) == 1 and artifacts.load(again[0])["decision"] != "NO-GO"


def test_missing_evidence_is_not_measured_with_the_reason():
    (og,) = g.evaluate(_kv_catalogue(), [], [], HOST["id"])
    assert og.decision == "NOT MEASURED"
    assert (
        "no run of gemma3-270m-q4_k_m · tg128@d4096 with type_k=q8_0"
        in og.results[0].reason
    )


def test_page_section_shows_every_gate():
    from pipelines.site.gates import gates_section

    runs = _pair([30.0, 30.2, 29.8, 30.1], [50.0, 49.8, 50.3, 50.1])
    md = gates_section(_kv_catalogue(), runs, [], [])
    assert "Go/no-go gates" in md and "NO-GO" in md and "NOT MEASURED" in md
    assert runs[1]["id"][:12] in md
    assert "KV q8\\_0" in md  # escaped for Markdown


def test_decisions_on_record_are_read_as_typed_records(tmp_path):
    """A decision written by write_decisions is read back as a DecisionRecord (core.records.decision)
    whose gates carry the values written, and the page lists it under "Decisions on record"."""
    from core.records.decision import DecisionRecord
    from pipelines.site.gates import gates_section

    runs = _pair([30.0, 30.2, 29.8, 30.1], [50.0, 49.8, 50.3, 50.1])
    cat = _kv_catalogue()
    cfile = tmp_path / "optimizations.yaml"
    cfile.write_text("x")
    (path,) = g.write_decisions(
        cat, runs, [], catalogue_file=cfile, root=tmp_path / "decisions"
    )
    (rec,) = g.load_decisions(tmp_path / "decisions")
    assert isinstance(rec, DecisionRecord) and rec.path.endswith(path.name)
    assert (
        rec.decision == "NO-GO"
        and rec.optimization_id == "kv"
        and rec.host_id == HOST["id"]
    )
    assert rec.catalogue["sha256"] == __import__("hashlib").sha256(b"x").hexdigest()
    overhead = rec.gates[0]
    assert (overhead.id, overhead.verdict, overhead.exact) == (
        "overhead",
        "NO-GO",
        False,
    )
    assert (
        overhead.ci95_high < 0.8
        and overhead.n == (4, 4)
        and overhead.evidence["candidate"] == runs[1]["id"]
    )
    assert rec.gates[1].exact and rec.gates[1].value == pytest.approx(15.4 / 29.0)
    md = gates_section(cat, runs, [], [rec])
    assert "Decisions on record" in md and rec.id in md.replace("\\", "")
