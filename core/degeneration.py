"""Degenerate model output: empty text, repetition loops, non-text.

One detector shared by every stage that looks at generated text (quality runs flag each
item with it; speed pages can flag a configuration whose sample text is garbage, as seed
001's "MoE2: 11.5 t/s, GARBAGE output"). It is a pure function of the text: no model, no
tokenizer, stdlib only, so runtime code may call it at run time and pipelines may call it
again on stored outputs and get the same answer.

``detect(text)`` returns ``{"degenerate": bool, "flags": [...], "reasons": [...],
"metrics": {...}, "version": N}``. Flags:

* ``empty``: nothing but whitespace.
* ``non_text``: a large share of replacement characters, control characters or other
  unprintable code points (what a model emits when its weights or KV cache are broken).
* ``repetition_loop``: the tail of the text is one unit repeated many times
  ("the the the ...", "!!!!!!", the same sentence over and over), or the word 4-grams are
  overwhelmingly repeats, or the text compresses far better than language does.

Thresholds are module constants, recorded in ``metrics`` beside the measured values so a
page can say why a text was flagged.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from typing import Any

VERSION = 1

NON_TEXT_MAX_SHARE = (
    0.10  # share of unprintable / replacement characters above which text is "non_text"
)
TAIL_WINDOW = 4000  # characters of the tail inspected for a loop
LOOP_MIN_REPEATS = 4  # a unit repeated at least this many times in a row at the end ...
LOOP_MIN_SPAN_CHARS = 40  # ... spanning at least this many characters ...
LOOP_MIN_SPAN_SHARE = 0.25  # ... and at least this share of the text
NGRAM = 4
NGRAM_MIN_WORDS = 40  # word n-gram check only on texts at least this long
NGRAM_MIN_UNIQUE_SHARE = 0.30  # below this share of distinct 4-grams the text loops
COMPRESS_MIN_CHARS = 600  # compression check only on texts at least this long
COMPRESS_MAX_RATIO = (
    0.12  # zlib size / raw size below this = far more repetitive than prose
)

_UNIT_MAX = 200  # the longest unit _TAIL_LOOP looks for
_TAIL_LOOP = re.compile(
    rf"(.{{1,{_UNIT_MAX}}}?)(?:\1){{{LOOP_MIN_REPEATS - 1},}}\s*\Z", re.S
)


def _unprintable_share(text: str) -> float:
    if not text:
        return 0.0
    bad = 0
    for ch in text:
        if ch in "\n\r\t":
            continue
        if ch == "\ufffd":
            bad += 1
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs", "Co", "Cn"):
            bad += 1
    return bad / len(text)


_SPACE = re.compile(r"\s")


def _loop_start(tail: str) -> tuple[int, int] | None:
    """Where ``_TAIL_LOOP.search(tail)`` matches, without the search: (start, unit length), or None when it
    does not. ``tail`` is rstripped (``_tail_loop``), so a match is the text from its start to the end made of
    one unit repeated at least LOOP_MIN_REPEATS times: the search's leftmost start is, over every unit length
    L up to _UNIT_MAX whose last LOOP_MIN_REPEATS units are alike, the earliest start at a multiple of L from
    the end where the text from there on repeats with period L; its unit is the shortest such L there. The
    search tries every start of the window with every unit length (tens of milliseconds a text, a good part of
    a fleet's cold build); this compares a few hundred slices. A tail ending on what the pattern reads as
    whitespace but ``str.rstrip`` did not strip (none is known) is left to the pattern."""
    n = len(tail)
    if not n or _SPACE.match(tail[-1]):
        m = _TAIL_LOOP.search(tail)
        return None if m is None else (m.start(), len(m.group(1)))
    best: tuple[int, int] | None = None
    for size in range(1, min(_UNIT_MAX, n // LOOP_MIN_REPEATS) + 1):
        unit = tail[n - size :]
        if not tail.endswith(unit * LOOP_MIN_REPEATS):
            continue
        # the periodic run extended back from the last LOOP_MIN_REPEATS units (tail[i] == tail[i + size] for
        # every i from its start on): by doubling steps while a step's characters all repeat, then halving
        at, step = n - LOOP_MIN_REPEATS * size, 1
        while step <= at and tail[at - step : at] == tail[at - step + size : at + size]:
            at -= step
            step *= 2
        while step > 1:
            step //= 2
            if (
                step <= at
                and tail[at - step : at] == tail[at - step + size : at + size]
            ):
                at -= step
        start = (
            at + (n - at) % size
        )  # the earliest start a whole number of units from the end
        if best is None or start < best[0]:
            best = (start, size)
    return best


def _tail_loop(text: str) -> tuple[str, int, int] | None:
    """(unit, repeats, span chars) of a unit repeated at the very end of the text, if any."""
    tail = text[-TAIL_WINDOW:].rstrip()
    found = _loop_start(tail)
    if found is None:
        return None
    start, size = found
    unit = tail[start : start + size]
    span = len(tail) - start
    return unit, span // max(len(unit), 1), span


def _unique_ngram_share(words: list[str]) -> float:
    grams = [tuple(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def detect(text: str | None) -> dict[str, Any]:
    """Flags and reasons for one generated text (see the module docstring)."""
    flags: list[str] = []
    reasons: list[str] = []
    if not isinstance(text, str):
        return {
            "degenerate": True,
            "flags": ["non_text"],
            "reasons": [f"output is {type(text).__name__}, not text"],
            "metrics": {},
            "version": VERSION,
        }
    stripped = text.strip()
    metrics: dict[str, Any] = {"chars": len(text)}
    if not stripped:
        return {
            "degenerate": True,
            "flags": ["empty"],
            "reasons": ["empty output"],
            "metrics": metrics,
            "version": VERSION,
        }

    share = _unprintable_share(text)
    metrics["unprintable_share"] = round(share, 4)
    if share > NON_TEXT_MAX_SHARE:
        flags.append("non_text")
        reasons.append(
            f"{share:.0%} of characters are unprintable or replacement characters "
            f"(limit {NON_TEXT_MAX_SHARE:.0%})"
        )

    loop = _tail_loop(stripped)
    if loop is not None:
        unit, repeats, span = loop
        metrics.update(loop_unit=unit[:80], loop_repeats=repeats, loop_span_chars=span)
        if span >= LOOP_MIN_SPAN_CHARS and span >= LOOP_MIN_SPAN_SHARE * len(stripped):
            flags.append("repetition_loop")
            reasons.append(
                f"ends with {unit[:40]!r} repeated {repeats} times ({span} characters, "
                f"{span / len(stripped):.0%} of the text)"
            )

    words = re.findall(r"\w+", stripped.lower())
    metrics["words"] = len(words)
    if len(words) >= NGRAM_MIN_WORDS:
        uniq = _unique_ngram_share(words)
        metrics["unique_4gram_share"] = round(uniq, 4)
        if uniq < NGRAM_MIN_UNIQUE_SHARE and "repetition_loop" not in flags:
            flags.append("repetition_loop")
            reasons.append(
                f"only {uniq:.0%} of word 4-grams are distinct (limit {NGRAM_MIN_UNIQUE_SHARE:.0%})"
            )

    if len(stripped) >= COMPRESS_MIN_CHARS:
        raw = stripped.encode("utf-8", errors="replace")
        ratio = len(zlib.compress(raw, 9)) / len(raw)
        metrics["compression_ratio"] = round(ratio, 4)
        if ratio < COMPRESS_MAX_RATIO and "repetition_loop" not in flags:
            flags.append("repetition_loop")
            reasons.append(
                f"compresses to {ratio:.0%} of its size (limit {COMPRESS_MAX_RATIO:.0%}): "
                "far more repetitive than language"
            )

    return {
        "degenerate": bool(flags),
        "flags": flags,
        "reasons": reasons,
        "metrics": metrics,
        "version": VERSION,
    }


def thresholds() -> dict[str, Any]:
    """The detector's limits, for the methodology page."""
    return {
        "non_text_max_share": NON_TEXT_MAX_SHARE,
        "loop_min_repeats": LOOP_MIN_REPEATS,
        "loop_min_span_chars": LOOP_MIN_SPAN_CHARS,
        "loop_min_span_share": LOOP_MIN_SPAN_SHARE,
        "ngram": NGRAM,
        "ngram_min_words": NGRAM_MIN_WORDS,
        "ngram_min_unique_share": NGRAM_MIN_UNIQUE_SHARE,
        "compress_min_chars": COMPRESS_MIN_CHARS,
        "compress_max_ratio": COMPRESS_MAX_RATIO,
        "version": VERSION,
    }
