"""The quality artifact: one model and configuration answering a suite's seeded sample, scored per item.

Built by :func:`new_quality` (from runtime.quality.runner, which generates in a child process and
scores), read as :class:`QualityRecord`: the suite (:class:`SuiteInfo`), the scored items
(:class:`QualityItem`) and the summary (:class:`QualitySummary`, pass rates with their Wilson CI95)
through typed fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from core.records.base import ArtifactRecord

ARTIFACT = "quality"


# -- the summary (computed once, here) ------------------------------------------------------------
def pass_rate(passed: int, n: int) -> dict[str, Any]:
    """n, passed, pass rate and its Wilson CI95."""
    from core import stats

    lo, hi = stats.wilson_interval(passed, n)
    return {
        "n": n,
        "passed": passed,
        "pass_rate": passed / n if n else None,
        "ci95_low": lo,
        "ci95_high": hi,
    }


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarize_items(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Pass rate with its Wilson interval, per tag too, degeneration and timing means."""
    n = len(items)
    passed = sum(1 for it in items if it["passed"])
    tags: dict[str, list[bool]] = {}
    for it in items:
        for t in it.get("tags") or []:
            tags.setdefault(t, []).append(it["passed"])
    degenerate = sum(1 for it in items if it["degeneration"]["degenerate"])
    chances = [it["details"].get("chance") for it in items]
    if not chances or any(c is None for c in chances):
        chances = [
            1.0 / len(it["check"].get("letters", "ABCD"))
            if it["scorer"] == "multiple_choice"
            else None
            for it in items
        ]
    norm = [it["details"]["acc_norm"] for it in items if "acc_norm" in it["details"]]
    timing = [it["timing"] for it in items]
    return {
        **pass_rate(passed, n),
        "by_tag": {t: pass_rate(sum(v), len(v)) for t, v in sorted(tags.items())},
        # multiple choice: the rate a guess gets (mean of 1 / number of choices), and acc_norm
        "chance": _mean(chances)
        if chances and all(c is not None for c in chances)
        else None,
        "acc_norm": pass_rate(sum(norm), len(norm))
        if norm and len(norm) == n
        else None,
        "degenerate": degenerate,
        "degenerate_rate": degenerate / n if n else None,
        "generation_errors": sum(1 for it in items if it.get("error")),
        "output_tokens_mean": _mean([t.get("output_tokens") for t in timing]),
        "prompt_tokens_mean": _mean([t.get("prompt_tokens") for t in timing]),
        "ttft_ms_mean": _mean([t.get("ttft_ms") for t in timing]),
        "e2e_ms_mean": _mean([t.get("e2e_ms") for t in timing]),
        "decode_tps_mean": _mean(
            [1000.0 / t["tpot_ms"] for t in timing if t.get("tpot_ms")]
        ),
    }


# -- building -------------------------------------------------------------------------------------
def new_quality(
    *,
    key: str,
    created: datetime,
    status: str,
    error: dict[str, Any] | None,
    matrix: dict[str, Any],
    backend: str,
    prompt_style: str,
    suite: dict[str, Any],
    generation: dict[str, Any],
    requested: dict[str, Any],
    swept: dict[str, Any],
    effective: dict[str, Any],
    model: dict[str, Any],
    host: dict[str, Any],
    build: dict[str, Any],
    items: list[dict[str, Any]],
    sandbox: dict[str, Any] | None,
    resources: dict[str, Any],
    log_tail: str,
) -> dict[str, Any]:
    """A quality artifact (the canonical dict written to disk), built in one place: the id in the
    one format (core.records.run.run_id), the summary computed from the scored items."""
    from core import artifacts
    from core.records.run import run_id

    return {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error,
        "matrix": dict(matrix),
        "backend": backend,
        "prompt_style": prompt_style,
        "suite": dict(suite),
        "generation": dict(generation),
        "settings": {
            "requested": dict(requested),
            "swept": dict(swept),
            "effective": dict(effective),
        },
        "model": dict(model),
        "host": host,
        "build": dict(build),
        "items": items,
        "summary": summarize_items(items),
        "sandbox": sandbox,
        "resources": dict(resources),
        "log_tail": log_tail,
    }


# -- reading --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PassRate:
    n: int = 0
    passed: int = 0
    pass_rate: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> PassRate | None:
        if d is None:
            return None
        return cls(
            int(d.get("n") or 0),
            int(d.get("passed") or 0),
            d.get("pass_rate"),
            d.get("ci95_low"),
            d.get("ci95_high"),
        )

    @classmethod
    def of(cls, passed: int, n: int) -> PassRate:
        r = pass_rate(passed, n)
        return cls(r["n"], r["passed"], r["pass_rate"], r["ci95_low"], r["ci95_high"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "ci95_low": self.ci95_low,
            "ci95_high": self.ci95_high,
        }


@dataclass(frozen=True, slots=True)
class QualitySummary:
    """The stored summary: pass rate with CI95, per tag, chance level, acc_norm, degeneration, timing means."""

    rate: PassRate
    by_tag: dict[str, PassRate]
    chance: float | None
    acc_norm: PassRate | None
    degenerate: int | None
    degenerate_rate: float | None
    generation_errors: int | None
    decode_tps_mean: float | None
    ttft_ms_mean: float | None
    e2e_ms_mean: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> QualitySummary:
        d = d or {}
        return cls(
            PassRate.from_dict(d) or PassRate(),
            {t: PassRate.from_dict(v) for t, v in (d.get("by_tag") or {}).items()},
            d.get("chance"),
            PassRate.from_dict(d.get("acc_norm")),
            d.get("degenerate"),
            d.get("degenerate_rate"),
            d.get("generation_errors"),
            d.get("decode_tps_mean"),
            d.get("ttft_ms_mean"),
            d.get("e2e_ms_mean"),
        )


@dataclass(frozen=True, slots=True)
class QualityItem:
    """One scored item: what was asked, what the model answered, the verdict and its evidence."""

    id: str
    passed: bool
    score: float | None
    scorer: str
    output: str
    prompt: str
    expected: str
    tags: tuple[str, ...] = ()
    system: str | None = None
    prompt_style: str | None = None
    check: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    degeneration: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def degenerate(self) -> bool:
        return bool(self.degeneration.get("degenerate"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QualityItem:
        return cls(
            d["id"],
            bool(d["passed"]),
            d.get("score"),
            d.get("scorer", ""),
            d.get("output", ""),
            d.get("prompt", ""),
            d.get("expected", ""),
            tuple(d.get("tags") or ()),
            d.get("system"),
            d.get("prompt_style"),
            d.get("check") or {},
            d.get("details") or {},
            d.get("degeneration") or {},
            d.get("error"),
            d.get("timing") or {},
        )


@dataclass(frozen=True, slots=True)
class SuiteInfo:
    name: str
    version: int | None
    category: str | None
    description: str
    file: str | None
    content_sha256: str | None
    n_items_in_suite: int | None
    prompt_styles: tuple[str, ...]
    source: dict[str, Any]
    sample: dict[str, Any]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteInfo:
        return cls(
            d["name"],
            d.get("version"),
            d.get("category"),
            d.get("description", ""),
            d.get("file"),
            d.get("content_sha256"),
            d.get("n_items_in_suite"),
            tuple(d.get("prompt_styles") or ()),
            d.get("source") or {},
            d.get("sample") or {},
        )


class QualityRecord(ArtifactRecord):
    """A loaded quality artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def backend(self) -> str:
        return self.doc["backend"]

    @property
    def prompt_style(self) -> str:
        """The prompt style (chat for artifacts from before styles existed)."""
        return self.doc.get("prompt_style") or "chat"

    @property
    def suite(self) -> SuiteInfo:
        return self._cached("suite", lambda: SuiteInfo.from_dict(self.doc["suite"]))

    @property
    def suite_name(self) -> str:
        return self.doc["suite"]["name"]

    @property
    def generation(self) -> dict[str, Any]:
        return self.doc.get("generation") or {}

    @property
    def requested(self) -> dict[str, Any]:
        return self.doc["settings"]["requested"]

    @property
    def swept(self) -> dict[str, Any]:
        return self.doc["settings"].get("swept") or {}

    @property
    def reported(self) -> dict[str, Any]:
        return self.doc["settings"].get("effective") or {}

    @property
    def matrix_name(self) -> str:
        return (self.doc.get("matrix") or {}).get("name", "")

    @property
    def model(self) -> dict[str, Any]:
        return self.doc["model"]

    @property
    def synthetic(self) -> bool:
        return bool(self.doc["model"].get("synthetic"))

    @property
    def quantization(self) -> str | None:
        return (self.doc["model"].get("gguf") or {}).get("quantization")

    @property
    def build(self) -> dict[str, Any]:
        return self.doc.get("build") or {}

    @property
    def server(self) -> str:
        """The server software an HTTP backend put the items to (llama-server, llama_cpp.server, ...); "" in process."""
        b = self.build
        return str(b.get("server") or b.get("endpoint") or "")

    @property
    def items(self) -> list[QualityItem]:
        return self._cached(
            "items",
            lambda: [QualityItem.from_dict(it) for it in self.doc.get("items") or []],
        )

    @property
    def passed(self) -> int:
        """Items that passed (counted from the items, not trusted from the stored summary)."""
        return sum(1 for it in self.items if it.passed)

    @property
    def rate(self) -> PassRate:
        """The pass rate over the scored items, with its Wilson CI95 computed again here."""
        return PassRate.of(self.passed, len(self.items))

    @property
    def summary(self) -> QualitySummary:
        return self._cached(
            "summary", lambda: QualitySummary.from_dict(self.doc.get("summary"))
        )

    @property
    def sandbox(self) -> dict[str, Any] | None:
        return self.doc.get("sandbox")

    @property
    def resources(self) -> dict[str, Any]:
        return self.doc.get("resources") or {}


def as_quality(doc: Mapping[str, Any]) -> QualityRecord:
    return doc if isinstance(doc, QualityRecord) else QualityRecord(doc)
