"""Quality vs speed: whole configurations traded off (seed 002, "Trade-offs: Quality vs Speed").

A configuration combines the base quantization, the KV cache type, speculation and adapters. Its
speed and memory come from the sweep of that name in the ``config-tradeoffs`` run matrix
(generate tests: the generation rate with its CI95, the run's peak RSS), its quality from the
quality matrix ``config-tradeoffs-quality-<sweep>`` (the same settings; the pass rate with its
Wilson CI95). Against the first configuration (max quality): the speed ratio with its CI95
(``core.stats.compare``) and the paired quality difference on the same items
(``core.stats.paired_rates``: Agresti-Min CI95, exact McNemar).

Reads ``run`` and ``quality`` artifacts only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core import stats
from core.records.quality import QualityRecord
from core.records.run import RunRecord

MATRIX = "config-tradeoffs"
QUALITY_PREFIX = "config-tradeoffs-quality-"
#: The seed's priorities, in its order: the sweep (and quality matrix suffix) each one names.
PRIORITIES = (
    ("max-quality", "Max quality"),
    ("balanced", "Balanced"),
    ("max-speed", "Max speed"),
)
METRIC = "generation_tps"


@dataclass
class Tradeoff:
    """One configuration on one host: its speed runs (per test) and its quality artifact."""

    host: str
    sweep: str
    priority: str
    runs: dict[str, RunRecord] = field(
        default_factory=dict
    )  # test name -> newest ok run
    quality: QualityRecord | None = None
    speed_vs_first: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # test -> compare()
    quality_vs_first: stats.PairedComparison | None = None

    @property
    def any_run(self) -> RunRecord | QualityRecord | None:
        return next(iter(self.runs.values()), None) or self.quality

    @property
    def peak_rss(self) -> int | None:
        vals = [r.resources.peak_rss_bytes for r in self.runs.values()]
        known = [v for v in vals if v]
        return max(known) if known else None

    def configuration(self) -> dict[str, Any]:
        """What the configuration is, read from its artifacts (never from the matrix file)."""
        src = self.any_run
        if src is None:
            return {}
        req = src.requested
        spec = req.get("speculative") or "none"
        adapters = (
            list(req.get("lora_adapters") or [])
            if isinstance(req.get("lora_adapters"), list)
            else []
        )
        return {
            "model": src.model_name,
            "quantization": src.quantization,
            "kv": f"{req.get('type_k') or 'f16'}/{req.get('type_v') or 'f16'}",
            "speculation": "none"
            if spec == "none"
            else f"{spec} (K = {req.get('draft_max')})",
            "adapters": adapters,
        }


def _newest(items: list[Any]) -> Any:
    return max(items, key=lambda d: (d.created, d.id))


def tradeoffs(runs: list[Any], quality: list[Any]) -> dict[str, list[Tradeoff]]:
    """Per host: the configurations measured there, in the seed's order."""
    known = dict(PRIORITIES)
    by: dict[tuple[str, str], Tradeoff] = {}
    grouped: dict[tuple[str, str, str], list[RunRecord]] = {}
    for d in runs:
        r = d
        if r.matrix_name != MATRIX or not r.ok or r.sweep not in known:
            continue
        grouped.setdefault((r.host_id, r.sweep or "", r.test_name), []).append(r)
    for (host, sweep, test), rs in grouped.items():
        t = by.setdefault((host, sweep), Tradeoff(host, sweep, known[sweep]))
        t.runs[test] = _newest(rs)
    qgroups: dict[tuple[str, str], list[QualityRecord]] = {}
    for d in quality:
        q = d
        name = q.matrix_name or ""
        if not q.ok or not name.startswith(QUALITY_PREFIX):
            continue
        sweep = name[len(QUALITY_PREFIX) :]
        if sweep in known:
            qgroups.setdefault((q.host_id, sweep), []).append(q)
    for (host, sweep), qs in qgroups.items():
        t = by.setdefault((host, sweep), Tradeoff(host, sweep, known[sweep]))
        t.quality = _newest(qs)
    out: dict[str, list[Tradeoff]] = {}
    order = [s for s, _ in PRIORITIES]
    for (host, _), t in sorted(
        by.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))
    ):
        out.setdefault(host, []).append(t)
    for rows in out.values():
        _compare_with_first(rows)
    return out


def _compare_with_first(rows: list[Tradeoff]) -> None:
    first = rows[0] if rows and rows[0].sweep == PRIORITIES[0][0] else None
    if first is None:
        return
    for t in rows[1:]:
        for test, r in t.runs.items():
            base = first.runs.get(test)
            a, b = (base.values(METRIC) if base else []), r.values(METRIC)
            if a and b:
                t.speed_vs_first[test] = stats.compare(a, b, True).to_dict()
        if first.quality is not None and t.quality is not None:
            ref = first.quality.verdicts.by_id()
            mine = t.quality.verdicts.by_id()
            shared = [i for i in ref if i in mine]
            if shared:
                t.quality_vs_first = stats.paired_rates(
                    [ref[i] for i in shared], [mine[i] for i in shared]
                )
