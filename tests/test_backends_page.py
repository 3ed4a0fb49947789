"""In-process backends side by side, and energy per token on the boards, from real artifacts.

tests/fixtures/h200-backends/ holds the lent H200's run artifacts of data/matrices/backends.yaml
and backends-transformers.yaml (the synthetic Llama 1B Q8_0 through llama.cpp and transformers,
energy from NVML), copied as measured; tests/fixtures/data holds CPU runs without an energy counter.
"""

from __future__ import annotations

import pytest

from pipelines import backends as cmp
from pipelines import compare
from pipelines.runs import load_runs
from pipelines.site import host_boards_page, methodology
from pipelines.site import serving as serving_pages
from tests.conftest import FIXTURES, GOLDEN

H200 = FIXTURES / "h200-backends"


@pytest.fixture(scope="module")
def h200():
    return load_runs(H200)


def _rows(h200):
    (group,) = cmp.backend_comparisons(h200)
    return group, {r["what"]: r for r in group["rows"]}


def test_every_figure_of_the_issue_is_compared(h200):
    group, rows = _rows(h200)
    assert (group["baseline"], group["candidate"], group["model"]) == (
        "llama_cpp",
        "transformers",
        "synthetic-llama-1b-q8_0",
    )
    assert list(rows) == [
        "Load time",
        "Cold TTFT",
        "Cold total (load + first request)",
        "Warm TTFT",
        "TPOT",
        "Prefill rate (pp512)",
        "Decode rate (tg128)",
        "Prefill energy (pp512)",
        "Decode energy (tg128)",
        "Peak VRAM",
        "Peak RSS",
    ]
    assert (
        rows["Load time"]["n_baseline"] == rows["Load time"]["n_candidate"] == 6
    )  # a fresh process per configuration
    assert (
        rows["Cold TTFT"]["n_baseline"] == rows["Cold TTFT"]["n_candidate"] == 3
    )  # three serve runs each
    assert (
        rows["Warm TTFT"]["n_baseline"] == 4
    )  # runs, not requests (issue 32): 1 chat + 3 serve artifacts sending the same request
    by_id = {r.id: r for r in h200}
    for r in rows.values():
        assert r["ratio"] == pytest.approx(r["candidate_mean"] / r["baseline_mean"])
        if r["n_baseline"] == r["n_candidate"] == 1:
            # one run a side and no run-to-run noise for this host or the fleet: the run is the unit, so no
            # interval (the repetitions inside the run never stand in for runs; issue 32)
            assert r["ci95_low"] is None and r["verdict"] == "insufficient data"
            continue
        assert r["ci95_low"] < r["ratio"] < r["ci95_high"]
        inside = r["ci95_low"] <= 1.0 <= r["ci95_high"]
        assert r["verdict"] == (
            "within noise"
            if inside
            else "win"
            if (r["ci95_low"] > 1.0) == r["higher_is_better"]
            else "loss"
        )
        assert all(by_id[i].backend == "llama_cpp" for i in r["baseline_ids"])
        assert all(by_id[i].backend == "transformers" for i in r["candidate_ids"])
    decode = rows["Decode energy (tg128)"]
    (tg,) = [r for r in h200 if r.backend == "transformers" and r.test_name == "tg128"]
    assert decode["candidate_mean"] == pytest.approx(tg.stat("decode_j_per_token").mean)


def test_the_comparisons_page_shows_them(h200):
    page = serving_pages.comparisons_page(h200)
    assert page.startswith(
        "## In-process backends on the same file"
    )  # no server run here: this section alone
    assert (
        "### <code>transformers</code> vs <code>llama_cpp</code>" in page
        and "device\\_name=NVIDIA H200" in page
    )
    assert "| Decode energy \\(tg128\\) | J/token (lower is better) |" in page
    assert "weights=dequantized from Q8\\_0 to bfloat16" in page


def test_rate_boards_carry_energy_where_measured(h200):
    golden = load_runs(GOLDEN / "runs")
    assert not any(
        r.stat("prefill_j_per_token") or r.stat("decode_j_per_token") for r in golden
    )
    page = host_boards_page.host_boards_page(list(h200) + golden)
    sections = page.split("\n## ")
    gpu_pp = next(
        s
        for s in sections
        if s.startswith(
            "pp512 on <code>lent-h200-c4a881f9</code> · <code>llama_cpp</code>"
        )
    )
    (row,) = [r for r in h200 if r.backend == "llama_cpp" and r.test_name == "pp512"]
    s = row.stat("prefill_j_per_token")
    assert "Prefill energy (J/token) [CI95]" in gpu_pp
    assert f"{s.mean:,.4f} [{s.ci95_low:,.4f} – {s.ci95_high:,.4f}]" in gpu_pp
    assert "Decode energy" not in gpu_pp  # a pp test measures prefill only
    cpu = [
        s
        for s in sections
        if s.split("\n")[0]
        in (
            "pp64 on <code>golden-host-55ecea05</code> · <code>llama_cpp</code>",
            "tg16 on <code>golden-host-55ecea05</code> · <code>llama_cpp</code>",
        )
    ]
    assert len(cpu) == 2 and not any("energy (J/token)" in s for s in cpu)


def test_compare_adds_energy_rows(h200):
    res = compare.compare(
        h200,
        compare.parse_selection("backend=llama_cpp"),
        compare.parse_selection("backend=transformers"),
    )
    metrics = {(r.test, r.metric): r for r in res.rows}
    assert {k for k in metrics if k[0] in ("pp512", "tg128")} == {
        ("pp512", "tokens_per_second"),
        ("pp512", "prefill_j_per_token"),
        ("tg128", "tokens_per_second"),
        ("tg128", "decode_j_per_token"),
    }
    assert (
        "cold-1",
        "cold_total_ms",
    ) in metrics  # the other kinds keep their headline alone
    r = metrics[("tg128", "decode_j_per_token")]
    assert (
        r.unit == "J/token"
        and not r.higher_is_better
        and r.ratio == pytest.approx(r.b_mean / r.a_mean)
    )
    # the run is the unit: one run a side and no run-to-run noise measured on the lent host, so no verdict
    # (core.stats.compare_runs), whatever the repetitions inside each run say
    assert (
        r.ratio > 3
        and r.verdict == "insufficient data"
        and "no run-to-run noise" in r.note
    )


def test_roofline_does_not_bound_dequantized_weights(h200):
    from pipelines.roofline import roofline_rows

    rows = {(r["id"]): r for r in roofline_rows(h200, [])}
    (tf,) = [r for r in h200 if r.backend == "transformers" and r.test_name == "tg128"]
    assert (
        rows[tf.id]["bytes"] is None
        and "dequantized from Q8_0 to bfloat16" in rows[tf.id]["note"]
    )
    (lc,) = [r for r in h200 if r.backend == "llama_cpp" and r.test_name == "tg128"]
    assert (
        rows[lc.id]["bytes"]["total"] > 1e9
    )  # the Q8_0 file's weights, read once per token


def test_methodology_lists_what_each_kind_means_per_backend():
    from docs.macros import backend_declarations

    rows = {r["name"]: r for r in backend_declarations()}
    assert rows["transformers"]["in_process"] and rows["transformers"][
        "test_kinds"
    ] == ["rate", "chat", "serve"]
    assert (
        "serve" in rows["llama_cpp"]["test_kinds"]
        and not rows["openai_http"]["in_process"]
    )
    text = methodology.backends_table(list(rows.values()))
    assert (
        "<code>serve</code>: serve in process: startup is the model load in a fresh worker process"
        in text
    )
    assert (
        "| <code>openai\\_http</code> | behind a server |" in text
        or "| <code>openai_http</code> | behind a server |" in text
    )
