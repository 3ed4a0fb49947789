"""The base of every test kind: its spec (what a matrix asks for) and its declaration.

A test kind lives in one module of this package (``rate.py``, ``chat.py``, ...) that owns:
its spec (a pydantic model parsed from matrix YAML), the metrics it measures, its headline
metric and table columns, and the typed shape of its samples and details. The module
declares all of that in one :class:`Kind` and registers it (:func:`core.kinds.register`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.precision import Precision


class TestSpec(BaseModel):
    """Base of every test kind: a name, repetitions and warm-up."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    repetitions: int | None = Field(
        None, ge=1, description="Timed repetitions (default: the matrix's)."
    )
    warmup: bool | None = Field(
        None, description="Run one untimed warm-up first (default: the matrix's)."
    )
    precision: Precision | None = Field(
        None,
        description="Repeat until the CI95 half-width is within a target "
        "(default: the matrix's); null: exactly `repetitions` (or `requests`).",
    )

    label: ClassVar[str] = ""
    # Fields that say how a test is measured, not what work it does (method, not work: a change
    # of them never makes two results different work; core.records.run.RunRecord.work). A kind
    # whose spec adds sample-size or warm-up fields adds them here.
    METHOD_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"repetitions", "warmup", "precision"}
    )
    # Fields that only name a test in tables: not the work either. A workload's ``id`` stays part of
    # the work: ids tell apart workloads run on purpose as separate results (cold-1, cold-2, cold-3).
    LABEL_FIELDS: ClassVar[frozenset[str]] = frozenset({"name"})

    @property
    def name(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def check_name(self) -> None:
        """A test's name becomes part of an artifact's file name: the rules of an artifact id
        (no hidden file, no path separator, no control characters, bounded length)."""
        name = self.name
        if not TEST_NAME_RE.match(name or "") or len(name) > 80:
            from core.yamlio import quote

            raise ValueError(
                f"test name {quote(name)} is not a valid id: 1-80 characters, letters, digits and "
                "._+@- , starting with a letter or digit"
            )

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        d["name"] = self.name
        return d


TEST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@-]*$")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


# -- the shapes of what a run of a kind stores ------------------------------------------------------
class Shape(BaseModel):
    """Base of a kind's ``samples`` and ``details`` models (and of the records inside them).

    The declared fields are typed (the run schema is generated from them: core/schema.py) and
    optional: a failed run keeps what it measured before it failed, an imported or older artifact
    what its source knew. A backend may keep facts of its own beside them (extra fields are kept
    as they are, untyped): the shape types what every backend of the kind shares and what the
    pipelines read."""

    model_config = ConfigDict(extra="allow", frozen=True)


class PerfCounters(Shape):
    """llama.cpp's own counters of one timed region (llama_perf_context)."""

    t_p_eval_ms: float | None = None
    n_p_eval: int | None = None
    t_eval_ms: float | None = None
    n_eval: int | None = None


class PrecisionRecord(Shape):
    """How repetition stopped (core.precision.Repeater.record)."""

    metric: str = Field(..., description="The metric whose CI95 was judged.")
    target_rel: float | None = Field(
        ...,
        description="Target CI95 half-width as a fraction of the mean; null: a fixed count.",
    )
    min_repetitions: int | None = None
    max_repetitions: int | None = None
    max_time_s: float | None = None
    n: int = Field(..., ge=0, description="Samples taken.")
    half_width_rel: float | None = Field(
        ..., description="CI95 half-width reached, as a fraction of the mean."
    )
    met: bool | None = Field(
        ..., description="Whether the target was met (null: no target)."
    )
    stop_reason: str | None = Field(
        ...,
        description="target_met, max_repetitions, max_time_s, fixed_count (; per level).",
    )
    elapsed_s: float | None = None
    percentile: float | None = Field(
        None,
        description="The percentile whose order-statistic CI95 was judged (null: the mean's).",
    )
    level: int | None = Field(
        None,
        description="The concurrency level of this record (a sweep's per-level records).",
    )
    levels: list[PrecisionRecord] | None = Field(
        None, description="Per level (a concurrency sweep)."
    )


class SpeculativeStats(Shape):
    """Drafted and accepted tokens of speculative decoding over a test's timed requests."""

    proposed: int | None = None
    accepted: int | None = None
    rounds: int | None = None
    empty_rounds: int | None = None
    draft_seconds: float | None = None
    acceptance: float | None = Field(None, description="accepted / proposed.")


class Details(Shape):
    """What every kind's ``details`` may hold: how it was measured and how repetition stopped."""

    method: str | None = Field(None, description="How it was measured, in words.")
    precision: PrecisionRecord | None = Field(
        None,
        description="Repeat to a precision: the target CI95 half-width, "
        "whether it was met and why repetition stopped.",
    )
    remote: dict[str, Any] | None = Field(
        None,
        description="A run on a remote host that never produced a result: "
        "what the controller knew (runtime.remote).",
    )


class Samples(Shape):
    """Base of a kind's ``samples``: the raw records behind its summary, kept verbatim."""


# -- the kind ---------------------------------------------------------------------------------------
def _no_values(samples: Any, metric: str) -> list[float]:
    return []


@dataclass(frozen=True)
class Kind:
    """A test kind, declared once by its module.

    ``headline`` is the metric it is ranked and compared on (None: not ranked, on no leaderboard, and
    no point of an optimization sweep, which compares each point with its baseline on it); ``columns``
    the metrics shown beside it in tables; ``metrics`` every metric its artifacts summarise;
    ``details`` / ``samples``: the pydantic models of its artifacts' ``details`` and ``samples``
    objects (the run schema's per-kind part is generated from them, core/schema.py);
    ``values(samples, metric)``: the raw per-sample values behind one metric of its summary
    (what a comparison of two runs needs), read from its typed samples; ``extra``: anything
    else the kind's own code wants to keep with it."""

    name: str
    spec: type[TestSpec]
    description: str
    headline: str | None = None
    columns: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    details: type[Details] = Details
    samples: type[Samples] = Samples
    values: Callable[[Any, str], list[float]] = _no_values
    extra: dict[str, Any] = field(default_factory=dict)
