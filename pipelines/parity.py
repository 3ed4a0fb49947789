"""Backend parity: the same quality items through several backends, compared item by item.

A quality matrix with ``backends:`` (data/matrices/quality-parity.yaml) puts one seeded sample
of a suite, with one generation setting, through several ways of running the same model file:
llama.cpp in process, llama_cpp.server, llama-server. Here the artifacts of such a run are
grouped (host, matrix, model file, suite and its content, prompt style, generation, item ids),
and each backend is compared with the reference (in process where it ran) on the items both
scored:

* agreement: identical output text, and identical verdict;
* the pass rates and their difference, with the Agresti-Min CI95 for paired proportions;
* the exact McNemar test on the discordant items (passed by one backend only): a backend
  whose verdicts differ beyond chance is a **win** or a **loss**, else **within noise**;
* every item whose output differs, with where the two texts part;
* latency on the same items (each item's end-to-end milliseconds, as the artifact's timing
  records it): both means and the mean paired difference with its Student-t CI95.

Reads ``quality`` artifacts only; every figure is computed again from the items.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core import stats
from core.records.quality import QualityRecord
from pipelines.quality import latest_per_key

IN_PROCESS_LABEL = "llama.cpp in process"


def in_process(doc: QualityRecord) -> bool:
    """Answered in the measuring process (no server between) by llama.cpp: its build records a
    llama.cpp commit and no server (read from the data, never from a backend's name)."""
    return not doc.server and bool(doc.build.get("llama_cpp_commit"))


def engine(doc: QualityRecord) -> str:
    """How a quality artifact reached the model: in process, or the server (or endpoint) it talked to."""
    if in_process(doc):
        return IN_PROCESS_LABEL
    requested = doc.requested
    if not doc.server and not requested.get("server"):
        return f"{doc.backend} in process"
    label = doc.server or requested.get("server") or doc.backend
    args = requested.get("server_args") or []
    return (
        f"{label} {' '.join(str(a) for a in args)} (HTTP)"
        if args
        else f"{label} (HTTP)"
    )


def _group_key(doc: QualityRecord) -> tuple:
    suite = doc.suite
    return (
        doc.host_id,
        doc.matrix_name,
        doc.model_sha256,
        suite.name,
        suite.content_sha256,
        doc.prompt_style,
        json.dumps(doc.generation, sort_keys=True),
        tuple(suite.sample.get("ids") or ()),
    )


class _Paired:
    """The paired figures of n items scored by a reference and another backend: b passed by the
    reference only, c by the other only (fields of the dataclasses below)."""

    n: int
    b: int
    c: int
    ref_passed: int
    other_passed: int

    @property
    def delta(self) -> float | None:
        return (self.other_passed - self.ref_passed) / self.n if self.n else None

    @property
    def delta_ci(self) -> tuple[float | None, float | None]:
        return stats.paired_difference_ci(self.b, self.c, self.n)

    @property
    def p_value(self) -> float | None:
        return (
            stats.mcnemar_exact(self.b, self.c) if self.b + self.c else None
        )  # nothing discordant: nothing to test

    @property
    def verdict(self) -> str:
        return stats.paired_verdict(self.b, self.c)

    # latency: the items both timed, in the same order on both sides (lists on the dataclasses)
    ref_ms: list[float]
    other_ms: list[float]

    @property
    def ref_latency_ms(self) -> float | None:
        return float(sum(self.ref_ms) / len(self.ref_ms)) if self.ref_ms else None

    @property
    def other_latency_ms(self) -> float | None:
        return float(sum(self.other_ms) / len(self.other_ms)) if self.other_ms else None

    @property
    def latency_delta_ms(self) -> float | None:
        """Mean paired difference, backend minus reference (the seed's 'runtime - vLLM')."""
        if not self.ref_ms:
            return None
        return float(
            sum(o - r for r, o in zip(self.ref_ms, self.other_ms)) / len(self.ref_ms)
        )

    @property
    def latency_delta_ci(self) -> tuple[float | None, float | None]:
        diffs = [o - r for r, o in zip(self.ref_ms, self.other_ms)]
        if len(diffs) < 2:
            return None, None
        s = stats.summary(diffs)
        lo, hi, _why = stats.mean_interval(s.n, s.mean, s.stddev, positive=False)
        return lo, hi


@dataclass
class ItemDiff:
    """One item whose output differs between the reference and another backend."""

    id: str
    ref_passed: bool
    other_passed: bool
    ref_output: str
    other_output: str
    diverge_at: int  # index of the first differing character
    ref_error: str | None = None
    other_error: str | None = None


@dataclass
class Pair(_Paired):
    """One backend against the reference on the items both scored."""

    reference: str
    other: str
    ref_id: str
    other_id: str
    n: int
    identical_output: int
    same_verdict: int
    ref_passed: int
    other_passed: int
    b: int  # passed by the reference only
    c: int  # passed by the other backend only
    diffs: list[ItemDiff] = field(default_factory=list)
    ref_ms: list[float] = field(default_factory=list)
    other_ms: list[float] = field(default_factory=list)


@dataclass
class Group:
    """One suite sample (one prompt style, one generation setting) put through several backends."""

    host: str
    matrix: str
    model: str
    suite: str
    style: str
    max_tokens: Any
    engines: dict[str, QualityRecord]  # engine label -> artifact
    pairs: list[Pair]

    @property
    def label(self) -> str:
        return self.suite if self.style == "chat" else f"{self.suite} · {self.style}"


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _e2e_ms(item: Any) -> float | None:
    """An item's end-to-end latency in ms, where its generation timed one (not an errored item)."""
    v = (item.timing or {}).get("e2e_ms")
    if item.error or not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return float(v) if v == v and v >= 0 and v != float("inf") else None


def compare_items(ref: QualityRecord, other: QualityRecord) -> Pair:
    """The other artifact against the reference, on the items both scored (by id)."""
    ref_items = {it.id: it for it in ref.items}
    other_items = {it.id: it for it in other.items}
    shared = [i for i in ref_items if i in other_items]
    pair = Pair(
        engine(ref), engine(other), ref.id, other.id, len(shared), 0, 0, 0, 0, 0, 0
    )
    for item_id in shared:
        a, o = ref_items[item_id], other_items[item_id]
        pa, po = a.passed, o.passed
        ta, to = a.output or "", o.output or ""
        pair.ref_passed += pa
        pair.other_passed += po
        pair.same_verdict += pa == po
        pair.b += pa and not po
        pair.c += po and not pa
        ra, ro = _e2e_ms(a), _e2e_ms(o)
        if ra is not None and ro is not None:
            pair.ref_ms.append(ra)
            pair.other_ms.append(ro)
        if ta == to and not a.error and not o.error:
            pair.identical_output += 1
        else:
            pair.diffs.append(
                ItemDiff(
                    item_id, pa, po, ta, to, _first_difference(ta, to), a.error, o.error
                )
            )
    return pair


def parity_groups(docs: list[Any]) -> list[Group]:
    """Every suite sample answered by two or more backends, each compared with the reference
    (in process where it ran, else the first engine by name). The newest artifact per key; of an
    engine met twice in one group, the newest complete one."""
    groups: dict[tuple, dict[str, QualityRecord]] = {}
    for d in latest_per_key([x for x in docs]):
        if not d.n_items:
            continue
        eng = groups.setdefault(_group_key(d), {})
        label = engine(d)
        cur = eng.get(label)
        if cur is None or (d.ok, d.created, d.id) > (cur.ok, cur.created, cur.id):
            eng[label] = d
    out = []
    for key, eng in groups.items():
        if len(eng) < 2:
            continue
        names = sorted(eng, key=lambda e: (e != IN_PROCESS_LABEL, e))
        ref = eng[names[0]]
        pairs = [compare_items(ref, eng[name]) for name in names[1:]]
        host, matrix, _sha, suite, _content, style, gen, _ids = key
        out.append(
            Group(
                host,
                matrix,
                ref.model_name,
                suite,
                style,
                json.loads(gen).get("max_tokens"),
                {n: eng[n] for n in names},
                pairs,
            )
        )
    return sorted(
        out, key=lambda g: (g.host, g.matrix, g.model, g.style != "completion", g.suite)
    )


@dataclass
class Overall(_Paired):
    """Every item of one run (host, matrix, model) pooled for one backend against the reference."""

    host: str
    matrix: str
    model: str
    reference: str
    other: str
    n: int
    identical_output: int
    same_verdict: int
    ref_passed: int
    other_passed: int
    b: int
    c: int
    suites: int
    ref_ms: list[float] = field(default_factory=list)
    other_ms: list[float] = field(default_factory=list)


def overall(groups: list[Group]) -> list[Overall]:
    """Per (host, matrix, model, backend pair): the items of every suite pooled (each item once)."""
    acc: dict[tuple, Overall] = {}
    for g in groups:
        for p in g.pairs:
            k = (g.host, g.matrix, g.model, p.reference, p.other)
            o = acc.setdefault(
                k,
                Overall(
                    g.host,
                    g.matrix,
                    g.model,
                    p.reference,
                    p.other,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                ),
            )
            o.n += p.n
            o.identical_output += p.identical_output
            o.same_verdict += p.same_verdict
            o.ref_passed += p.ref_passed
            o.other_passed += p.other_passed
            o.b += p.b
            o.c += p.c
            o.suites += 1
            o.ref_ms += p.ref_ms
            o.other_ms += p.other_ms
    return list(acc.values())
