"""Compare two selections of results, the way compare-llama-bench.py users expect.

A selection is a filter over run artifacts, written ``key=value`` pairs separated by
commas (several values of one key separated by ``|``):

* ``host=`` host id or host name (a prefix of the id works: ``host=vm``);
* ``build=`` a build variant's label (``build=threads-halved``), ``build=ordinary`` for
  builds without one, or any text in the build (``build=0c1e570``, ``build=0.3.36``);
* ``backend=`` a backend (``llama_cpp``), an HTTP server (``llama-server``) or both
  (``openai_http (llama-server)``); ``model=``, ``test=`` exact names;
* ``since=`` / ``until=`` ISO dates or times, compared with the artifact's creation time;
* ``artifacts=`` artifact files, folders or globs (relative to the project root);
* ``id=`` artifact ids.

The two selections are matched on the work they ran (core.records.run: the model's identity,
the test's work parameters, the backend class; the method, how precisely each was measured,
never matters), the backend, the requested settings (those not left to the backend's default)
and the host, minus what the two selections choose differently on purpose: different hosts
are compared on the same work apart from the host, different backends on the same work apart
from backend and settings. The
run is the unit: on each side every result of a matched configuration is one run (its mean);
the row compares the geometric means of the two sides' run means, with a CI95 from the spread
between the runs of a side of two or more, or, for a side of one run, the host's run-to-run
noise for that kind of test (core.stats.compare_runs, pipelines.noise). A side of one run on a
host whose noise was never measured has no interval ("insufficient data", and says why). The
verdict is from B's point of view: win, loss or within noise (the interval contains 1). All rows of
one comparison are one family held to a false discovery rate (core.stats.fleet_fdr): a win or a loss
stands only if it survives the false discovery rate (core.stats.FDR_NAME) over every row with an
interval, so comparing hundreds of configurations (a fleet, a CI gate) does not call changes by chance.
"""

from __future__ import annotations

import fnmatch
import io
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from core import csvcell, stats
from core.errors import UserError
from core.kinds import headline
from core.metrics import ENERGY_METRICS, METRICS
from core.paths import project_root, relpath
from core.records.run import RunRecord, digest
from pipelines import noise as noise_mod

KEYS = (
    "host",
    "build",
    "backend",
    "model",
    "test",
    "since",
    "until",
    "artifacts",
    "id",
)


class CompareError(UserError):
    """A selection is malformed, matches nothing, or the two share no configuration."""


@dataclass(frozen=True)
class Selection:
    text: str
    filters: dict[str, tuple[str, ...]]

    @property
    def label(self) -> str:
        return self.text


def parse_selection(text: str, name: str = "selection") -> Selection:
    """``host=vm,build=threads-halved`` -> Selection; CompareError names the bad part."""
    filters: dict[str, tuple[str, ...]] = {}
    if not text or not text.strip():
        raise CompareError(
            "is empty; write key=value pairs, e.g. host=vm,build=ordinary", field=name
        )
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise CompareError(
                f"{part!r} is not key=value (keys: {', '.join(KEYS)})", field=name
            )
        k, v = (s.strip() for s in part.split("=", 1))
        if k not in KEYS:
            raise CompareError(
                f"unknown key {k!r} (keys: {', '.join(KEYS)})", field=name
            )
        values = tuple(x.strip() for x in v.split("|") if x.strip())
        if not values:
            raise CompareError(f"{k}= has no value", field=name)
        if k in ("since", "until"):
            for x in values:
                try:
                    datetime.fromisoformat(x.replace("Z", "+00:00"))
                except ValueError:
                    raise CompareError(
                        f"{k}={x!r} is not an ISO date or time (e.g. 2026-11-26 or 2026-11-26T06:00)",
                        field=name,
                    ) from None
        filters[k] = filters.get(k, ()) + values
    return Selection(text.strip(), filters)


def _builds_with_almanac(ra: RunRecord, rb: RunRecord) -> tuple[str, str]:
    """The two sides' builds in words, each with the almanac (version, stats method) that measured it where
    the two differ in it: the environment a reader must see (core.records.run.STATS_METHODS)."""
    if ra.almanac_method == rb.almanac_method:
        return ra.backend_build, rb.backend_build
    return (
        f"{ra.backend_build} · almanac {ra.almanac_method}",
        f"{rb.backend_build} · almanac {rb.almanac_method}",
    )


def _build_match(r: RunRecord, value: str) -> bool:
    if value == "ordinary":
        return not r.build_label
    if r.build_label == value:
        return True
    text = f"{r.backend_build} almanac {r.almanac_version}"
    return value in text


def _artifact_match(r: RunRecord, patterns: tuple[str, ...]) -> bool:
    path = r.path
    for p in patterns:
        pat = relpath(Path(p)) if Path(p).is_absolute() else p.rstrip("/")
        if path == pat or path.startswith(pat + "/") or fnmatch.fnmatch(path, pat):
            return True
    return False


def matches(r: RunRecord, sel: Selection) -> bool:
    f = sel.filters
    if "host" in f and not any(
        r.host_id == v or r.host_name == v or r.host_id.startswith(v) for v in f["host"]
    ):
        return False
    if "build" in f and not any(_build_match(r, v) for v in f["build"]):
        return False
    if (
        "backend" in f
        and r.backend not in f["backend"]
        and r.backend_name not in f["backend"]
        and r.server not in f["backend"]
    ):
        return False
    if "model" in f and r.model_name not in f["model"]:
        return False
    if "test" in f and r.test_name not in f.get("test", ()):
        return False
    if "since" in f and not any(r.created >= v for v in f["since"]):
        return False
    if "until" in f and not any(r.created[: len(v)] <= v for v in f["until"]):
        return False
    if "artifacts" in f and not _artifact_match(r, f["artifacts"]):
        return False
    if "id" in f and r.id not in f["id"]:
        return False
    return True


def compared_on(a: Selection, b: Selection) -> set[str]:
    """The dimensions the two selections choose differently (compared on purpose)."""
    return {k for k in KEYS if a.filters.get(k) != b.filters.get(k)}


def work_parts(r: RunRecord, on: set[str]) -> dict[str, Any]:
    parts: dict[str, Any] = {
        "work": r.work,
        "backend": r.backend_name,
        "requested": r.requested_explicit,
        "host": r.host_id,
    }
    if "host" in on:
        parts.pop("host")
    if (
        "backend" in on
    ):  # another backend, perhaps of the other class (in process vs behind a server)
        parts["work"] = {k: v for k, v in parts["work"].items() if k != "class"}
        parts.pop("backend")
        parts.pop("requested")
    return parts


@dataclass
class Row:
    model: str
    test: str
    metric: str
    unit: str
    higher_is_better: bool
    host_a: str
    host_b: str
    backend_a: str
    backend_b: str
    build_a: str
    build_b: str
    a_id: str
    b_id: str
    a_mean: float
    a_stddev: float | None
    a_n: int
    b_mean: float
    b_stddev: float | None
    b_n: int
    ratio: float | None
    ci95_low: float | None
    ci95_high: float | None
    verdict: str
    settings: str = ""
    effective_diff: str = ""
    a_runs: int = (
        1  # runs on each side (the unit of the comparison); a_id / b_id: the newest
    )
    b_runs: int = 1
    method: str = ""  # what the interval rests on: "runs", "runs + host noise"
    note: str = ""  # why there is no interval
    q_value: float | None = (
        None  # the p-value adjusted over every row of this comparison (core.stats.fleet_fdr)
    )
    # the verdict of this row's comparison alone (what the Host vs host page and its picker show for one
    # pair of hosts); ``verdict`` is after the family's false discovery rate, and the note says when they differ
    single_verdict: str = ""


@dataclass
class Result:
    a: Selection
    b: Selection
    compared_on: list[str]
    rows: list[Row] = field(default_factory=list)
    a_count: int = 0
    b_count: int = 0

    @property
    def tested(self) -> int:
        """Rows held together to the false discovery rate (those with an interval)."""
        return sum(r.q_value is not None for r in self.rows)

    def losses_beyond(self, pct: float) -> list[Row]:
        """Losses (after the false discovery rate over every row) worse than ``pct`` percent, largest first."""
        out = []
        for r in self.rows:
            if r.verdict != "loss" or r.ratio is None:
                continue
            worse = (1.0 - r.ratio) if r.higher_is_better else (r.ratio - 1.0)
            if worse * 100.0 > pct:
                out.append(r)
        return sorted(out, key=lambda r: -abs(r.ratio - 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.text,
            "b": self.b.text,
            "compared_on": self.compared_on,
            "a_results": self.a_count,
            "b_results": self.b_count,
            "rows": [asdict(r) for r in self.rows],
        }


def _settings_text(req: dict[str, Any]) -> str:
    keep = {k: v for k, v in sorted(req.items()) if v is not None}
    return ", ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in keep.items()
    )


def _diff_text(a: dict[str, Any], b: dict[str, Any]) -> str:
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if json.dumps(va, sort_keys=True, default=str) != json.dumps(
            vb, sort_keys=True, default=str
        ):
            out.append(
                f"{k}: {json.dumps(va, default=str)}→{json.dumps(vb, default=str)}"
            )
    return "; ".join(out)


def compare(
    docs: list[RunRecord],
    a: Selection,
    b: Selection,
    memo: dict[tuple[str, str, tuple[str, ...]], str] | None = None,
) -> Result:
    """The comparison table; CompareError when a selection matches nothing or nothing is shared.

    ``memo`` (a dict the caller keeps across calls on the same records) holds each record's work
    digest, so that comparing many selections over the same results digests each result once."""
    recs = [
        r
        for r in list(docs)
        if r.ok and not r.disturbed and headline(r.test_kind) is not None
    ]
    on = compared_on(a, b)
    on_key = tuple(sorted(on))
    memo = {} if memo is None else memo

    def work_digest(r: RunRecord) -> str:
        k = (r.id, r.key, on_key)
        d = memo.get(k)
        if d is None:
            d = memo[k] = digest(work_parts(r, on))
        return d

    side_a = [r for r in recs if matches(r, a)]
    side_b = [r for r in recs if matches(r, b)]
    if not side_a:
        raise CompareError(
            f"selection A ({a.text}) matches no measured result", field="--baseline"
        )
    if not side_b:
        raise CompareError(
            f"selection B ({b.text}) matches no measured result", field="--candidate"
        )

    def by_work(side: list[RunRecord]) -> dict[str, list[RunRecord]]:
        out: dict[str, list[RunRecord]] = {}
        for r in side:
            out.setdefault(work_digest(r), []).append(r)
        for runs in out.values():
            runs.sort(key=lambda r: (r.created, r.id))
        return out

    all_a, all_b = by_work(side_a), by_work(side_b)
    na, nb = {k: v[-1] for k, v in all_a.items()}, {k: v[-1] for k, v in all_b.items()}
    shared = [k for k in na if k in nb and na[k].id != nb[k].id]
    if not shared:
        raise CompareError(
            f"selections A ({a.text}) and B ({b.text}) share no configuration "
            f"({len(side_a)} and {len(side_b)} results; matched on test, model file"
            + ("" if "backend" in on else ", backend, requested settings")
            + ("" if "host" in on else ", host")
            + ")"
        )
    rows = []
    cmps: list[stats.Comparison] = []
    from pipelines import facts as facts_mod

    fx = facts_mod.of(docs)
    for k in shared:
        head = na[k].headline_metric
        assert head is not None
        # each side is one environment (build, library setup, settings as resolved: a group of the fact layer),
        # never a pool of several: where a side's runs span several, its representative one (the fact layer's rule)
        runs_a, runs_b = (
            _one_environment(fx, all_a[k], head),
            _one_environment(fx, all_b[k], head),
        )
        ra, rb = runs_a[-1], runs_b[-1]
        # the headline (the runs as the unit, the host's run-to-run noise as every figure of the site has it),
        # then energy per token where both sides measured it (a row each)
        for m in [head] + [
            METRICS[e] for e in ENERGY_METRICS if ra.stat(e) and rb.stat(e)
        ]:
            sa, sb = _side(fx, runs_a, m, m is head), _side(fx, runs_b, m, m is head)
            if sa is None or sb is None:
                continue
            c = stats.combine_sides(sa, sb, m.higher_is_better)
            cmps.append(c)
            (ma, sda, nra), (mb, sdb, nrb) = (
                _side_value(runs_a, m.name),
                _side_value(runs_b, m.name),
            )
            rows.append(
                Row(
                    ra.model_name,
                    ra.test_name,
                    m.name,
                    m.unit,
                    m.higher_is_better,
                    ra.host_id,
                    rb.host_id,
                    ra.backend_name,
                    rb.backend_name,
                    *_builds_with_almanac(ra, rb),
                    ra.id,
                    rb.id,
                    ma,
                    sda,
                    nra,
                    mb,
                    sdb,
                    nrb,
                    c.ratio,
                    c.ci95_low,
                    c.ci95_high,
                    c.verdict,
                    "" if "backend" in on else _settings_text(ra.requested_explicit),
                    _diff_text(ra.effective, rb.effective),
                    sa.runs,
                    sb.runs,
                    c.method,
                    c.note,
                )
            )
    # every row of one comparison is one family: a win or loss stands only at the false discovery rate
    for r, c in zip(rows, stats.fleet_fdr(cmps)):
        r.single_verdict = r.verdict
        r.verdict, r.note, r.q_value = c.verdict, c.note, c.q_value
    rows.sort(key=lambda r: (r.model, r.test, r.settings, r.host_a, r.backend_a))
    return Result(a, b, sorted(on), rows, len(side_a), len(side_b))


def _one_environment(fx: Any, runs: list[RunRecord], metric: Any) -> list[RunRecord]:
    """A side's runs of one work, from one environment only: the runs of its representative group of the fact
    layer (pipelines.facts.Facts.representative) where they span several (oldest first)."""
    groups: dict[str, Any] = {}
    for r in runs:
        g = fx.group_of(r)
        if g is not None:
            groups.setdefault(g.key, g)
    if len(groups) <= 1:
        return runs
    rep = fx.representative(list(groups.values()), metric)
    keep = [r for r in runs if fx.group_of(r) is rep] if rep is not None else runs
    return keep or runs


def _side(
    fx: Any, runs: list[RunRecord], metric: Any, headline_: bool
) -> stats.SideEstimate | None:
    """One side as every figure of the site is estimated (core.stats.pooled_side): the host's run-to-run noise
    for that kind of test (the fact layer's), the spread between its runs without one, the fleet's pooled noise
    for a single run of a host without one. Energy rows: the runs' own spread only."""
    from core import noise as noise_core

    values = [
        v for v in (noise_mod.run_value(r, metric.name) for r in runs) if v is not None
    ]
    if not values:
        return None
    means = [v[0] for v in values]
    rel = values[0][1] if len(values) == 1 else None
    if not headline_:
        return stats.side_estimate(means, rel_se=rel)
    own = noise_mod.noise_for(fx.noise, runs[-1])
    fleet = fx.fleet_noise.get(noise_core.noise_class(runs[-1].test))
    return stats.pooled_side(means, noise=own, fallback=fleet, rel_se=rel)


def _side_value(runs: list[RunRecord], metric: str) -> tuple[float, float | None, int]:
    """(value, spread, repetitions) of one side: one run's mean and stddev, or the geometric mean of
    several runs' means and the standard deviation of those means (the spread between runs)."""
    import math

    ss = [s for s in (r.stat(metric) for r in runs) if s is not None and s.mean]
    n = sum(s.n for s in ss)
    if len(ss) == 1:
        return float(ss[0].mean), ss[0].stddev, n
    means = [float(s.mean) for s in ss if s.mean > 0]
    geo = math.exp(sum(math.log(v) for v in means) / len(means))
    c = sum(means) / len(means)
    return geo, math.sqrt(sum((v - c) ** 2 for v in means) / (len(means) - 1)), n


# -- output ---------------------------------------------------------------------------------
def _fmt(v: float | None, d: int = 2) -> str:
    return "—" if v is None else f"{v:,.{d}f}"


def _value(mean: float, sd: float | None, n: int, runs: int = 1) -> str:
    if runs > 1:
        return f"{_fmt(mean)} ± {_fmt(sd)} between {runs} runs (n={n})"
    return f"{_fmt(mean)} ± {_fmt(sd)} (1 run, n={n})"


def _ratio(r: Row) -> str:
    if r.ratio is None:
        return "—"
    ci = (
        f" (no interval: {r.note})"
        if r.ci95_low is None and r.note
        else ""
        if r.ci95_low is None
        else f" [{r.ci95_low:.3f}, {r.ci95_high:.3f}]"
    )
    return f"{r.ratio:.3f}{ci}"


def headers(res: Result) -> list[str]:
    h = ["model", "test"]
    if "host" not in res.compared_on:
        h.append("host")
    if "backend" in res.compared_on:
        h += ["backend A", "backend B"]
    else:
        h.append("backend")
    return h + ["metric", "A", "B", "B/A [CI95]", "verdict"]


def text_rows(res: Result) -> list[list[str]]:
    out = []
    for r in res.rows:
        row = [r.model, r.test]
        if "host" not in res.compared_on:
            row.append(r.host_a)
        row += (
            [r.backend_a, r.backend_b]
            if "backend" in res.compared_on
            else [r.backend_a]
        )
        row += [
            f"{r.metric} ({r.unit}, {'higher' if r.higher_is_better else 'lower'} is better)",
            _value(r.a_mean, r.a_stddev, r.a_n, r.a_runs),
            _value(r.b_mean, r.b_stddev, r.b_n, r.b_runs),
            _ratio(r),
            r.verdict,
        ]
        out.append(row)
    return out


def markdown(res: Result) -> str:
    """Plain Markdown (for a terminal, a PR comment or a file; the site renders through its own table())."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    hs = headers(res)
    lines = [
        (
            f"A: `{res.a.text}` ({res.a_count} results) · B: `{res.b.text}` ({res.b_count} results) · "
            f"compared on: {', '.join(res.compared_on)} · {len(res.rows)} shared configurations · "
            f"{res.tested} tested together at a false discovery rate of {stats.FDR_Q:g} ({stats.FDR_NAME})"
        ),
        "",
        "| " + " | ".join(hs) + " |",
        "| "
        + " | ".join("--:" if h in ("A", "B", "B/A [CI95]") else ":--" for h in hs)
        + " |",
    ]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in text_rows(res)]
    return "\n".join(lines) + "\n"


def to_csv(res: Result) -> str:
    buf = io.StringIO()
    fields = list(Row.__dataclass_fields__)
    w = csvcell.dict_writer(buf, fields, lineterminator="\n")
    w.writeheader()
    for r in res.rows:
        w.writerow(asdict(r))
    return buf.getvalue()


def write_outputs(res: Result, out: Path) -> list[Path]:
    """``out`` without suffix (or with .md): writes <out>.md, <out>.json and <out>.csv atomically."""
    from core.artifacts import atomic_write_text

    base = out.with_suffix("") if out.suffix in (".md", ".json", ".csv") else out
    paths = [
        base.with_suffix(".md"),
        base.with_suffix(".json"),
        base.with_suffix(".csv"),
    ]
    atomic_write_text(paths[0], markdown(res))
    atomic_write_text(
        paths[1],
        json.dumps(res.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n",
    )
    atomic_write_text(paths[2], to_csv(res))
    return paths


def default_root() -> Path:
    return project_root() / "data" / "runs"
