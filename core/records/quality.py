"""The quality artifact: one model and configuration answering a suite's seeded sample, scored per item.

Built by :func:`new_quality` (from runtime.quality.runner, which generates in a child process and
scores) as its model, read as :class:`QualityRecord`: the suite, the scored items and the summary
(pass rates with their Wilson CI95) are the model's parts (core.models.quality: Suite, QualityItem,
QualitySummary, PassRate), declared there once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from core.models.quality import (
    PassRate,
    Quality,
    QualityItem,
    QualitySummary,
    Suite,
)

__all__ = [
    "PassRate",
    "QualityItem",
    "QualityRecord",
    "QualitySummary",
    "Suite",
    "Verdict",
    "Verdicts",
]
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


# -- the verdicts (what every build reads of every artifact's items) -----------------------------------
class Verdict(NamedTuple):
    """One scored item's verdict: its id, whether it passed, whether its output was degenerate (and
    the detector's flags then), its tags."""

    id: str
    passed: bool
    degenerate: bool
    tags: tuple[str, ...]
    flags: tuple[str, ...]


#: one tuple for all the equal tuples of ids, tags and flags of the artifacts loaded (a suite sample's)
_ONE: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _one(t: tuple[Any, ...]) -> Any:
    return _ONE.setdefault(t, t)


class Verdicts:
    """The part of a quality artifact's items every build reads of every artifact (pass rates and
    their intervals, paired comparisons on shared items, roles' quality and degeneration evidence):
    each item's :class:`Verdict`, in the items' order. A loaded artifact's items stay in its file
    (core.records.heavy); these are computed from them once, as the file is loaded, and kept: a few
    hundred bytes an artifact (the ids and tags are one tuple for every artifact of one suite
    sample; passed and degenerate are a byte an item), where its items held about 140 KiB."""

    __slots__ = ("ids", "passed", "degenerate", "tags", "flags")

    def __init__(self, items: Any) -> None:
        rows = [it if isinstance(it, Mapping) else {} for it in items or []]
        degs = [it.get("degeneration") or {} for it in rows]
        ids = tuple(it.get("id") for it in rows)
        tags = tuple(tuple(it.get("tags") or ()) for it in rows)
        self.ids: tuple[str, ...] = _one(ids)
        self.tags: tuple[tuple[str, ...], ...] = _one(tuple(map(_one, tags)))
        self.passed = bytes(bool(it.get("passed")) for it in rows)
        self.degenerate = bytes(bool(d.get("degenerate")) for d in degs)
        #: the detector's flags of each degenerate item, by position (None: no item degenerate)
        self.flags: dict[int, tuple[str, ...]] | None = {
            i: _one(tuple(d.get("flags") or ()))
            for i, d in enumerate(degs)
            if self.degenerate[i]
        } or None

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.ids, self.tags, self.passed, self.degenerate, self.flags)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        """Unpickled (pipelines.light_pack): its tuples one object with every equal one, as when made."""
        ids, tags, self.passed, self.degenerate, flags = state
        self.ids = _one(tuple(ids))
        self.tags = _one(tuple(map(_one, tags)))
        self.flags = {i: _one(tuple(f)) for i, f in flags.items()} if flags else None

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[Verdict]:
        flags = self.flags or {}
        for i, iid in enumerate(self.ids):
            yield Verdict(
                iid,
                bool(self.passed[i]),
                bool(self.degenerate[i]),
                self.tags[i],
                flags.get(i, ()),
            )

    @property
    def n_passed(self) -> int:
        return self.passed.count(1)

    @property
    def n_degenerate(self) -> int:
        return self.degenerate.count(1)

    def by_id(self) -> dict[str, bool]:
        """Item id -> passed (of an id met twice, its last item)."""
        return dict(zip(self.ids, map(bool, self.passed), strict=True))


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
    """A quality artifact (the canonical dict written to disk), built in one place as its model
    (core.models.quality.Quality): the id in the one format (core.records.run.run_id), the summary
    computed from the scored items. A value the model refuses is one ArtifactError naming the field
    path and what is wrong."""
    from core import artifacts
    from core.records.run import run_id

    raw = {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error,
        "matrix": matrix,
        "backend": backend,
        "prompt_style": prompt_style,
        "suite": suite,
        "generation": generation,
        "settings": {"requested": requested, "swept": swept, "effective": effective},
        "model": model,
        "host": host,
        "build": build,
        "items": items,
        "summary": summarize_items(items),
        "sandbox": sandbox,
        "resources": resources,
        "log_tail": log_tail,
    }
    # as JSON values (a tuple is a list, as it is written), then through the model
    return Quality.check(
        json.loads(json.dumps(raw)), f"<quality artifact {raw['id']}>"
    ).dump()


# -- reading --------------------------------------------------------------------------------------
class QualityRecord(ArtifactRecord):
    """A loaded quality artifact, read through its model (core.models.quality.Quality)."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def envelope(self) -> Quality:
        """The document read through its model; a rejection is one ArtifactError naming the file,
        the field path and what is wrong."""
        return self._cached(
            "envelope", lambda: Quality.check(self.stored, self.path or self.id)
        )

    @property
    def backend(self) -> str:
        return self.doc["backend"]

    @property
    def prompt_style(self) -> str:
        """The prompt style (chat for artifacts from before styles existed)."""
        return self.doc.get("prompt_style") or "chat"

    @property
    def suite(self) -> Suite:
        return self._cached("suite", lambda: Suite.read(self.doc["suite"]))

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
        """The scored items, whole (prompts, outputs, timings): a loaded artifact's are read from its
        file (core.records.heavy), their models kept for the records read last; what every page reads
        of every artifact is :attr:`verdicts`."""
        return self._cached_bounded(
            "items",
            lambda: [QualityItem.read(it) for it in self._part("items") or []],
        )

    @classmethod
    def light_of(cls, doc: Mapping[str, Any]) -> Verdicts:
        return Verdicts(doc.get("items"))

    @property
    def verdicts(self) -> Verdicts:
        """Each item's verdict (id, passed, degenerate, tags, flags): computed once from the items (a
        loaded artifact's as its file was loaded) and kept."""
        src = self._src
        if src is not None and isinstance(src.light, Verdicts):
            return src.light
        return self._cached("verdicts", lambda: Verdicts(self._part("items")))

    @property
    def n_items(self) -> int:
        """How many items were scored."""
        return len(self.verdicts)

    @property
    def passed(self) -> int:
        """Items that passed (counted from the items, not trusted from the stored summary)."""
        return self.verdicts.n_passed

    @property
    def rate(self) -> PassRate:
        """The pass rate over the scored items, with its Wilson CI95 computed again here."""
        return self._cached(
            "rate",
            lambda: PassRate.model_validate(pass_rate(self.passed, self.n_items)),
        )

    @property
    def summary(self) -> QualitySummary:
        return self._cached(
            "summary", lambda: QualitySummary.read(self.doc.get("summary"))
        )

    @property
    def sandbox(self) -> dict[str, Any] | None:
        return self.doc.get("sandbox")

    @property
    def resources(self) -> dict[str, Any]:
        return self.doc.get("resources") or {}


def as_quality(doc: Mapping[str, Any]) -> QualityRecord:
    return doc if isinstance(doc, QualityRecord) else QualityRecord(doc)
