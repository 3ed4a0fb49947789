"""Request traces: timestamped (input length, output length) rows read from a file, the input of
trace replay (the ``trace`` workload of the load kinds, ``runtime.load.workload``).

Layouts read as they are published:

* ``mooncake`` (JSONL, Mooncake's ``mooncake_trace.jsonl``): ``timestamp`` in milliseconds,
  ``input_length``, ``output_length``, ``hash_ids`` (one id per 512-token block of the prompt;
  two requests sharing leading ids share that prefix);
* ``burstgpt`` (CSV, BurstGPT's ``BurstGPT_*.csv``): ``Timestamp`` in seconds, ``Model``,
  ``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``; rows whose response is
  0 tokens (failed requests in the log) are skipped and counted;
* ``generic`` (JSONL or CSV, ours): ``timestamp`` (seconds, or ``timestamp_ms``),
  ``input_length``, ``output_length``, optional ``session_id`` and ``prefix_hash`` (requests with
  the same hash share their first ``block_tokens`` tokens) or ``hash_ids`` (as Mooncake's).

``auto`` picks the layout from the file's first row. Bad input is one line naming the file, the
row (1-based, the header not counted) and what is wrong: a missing column, a negative or
decreasing timestamp, a length that is not a whole number >= 1 (output) or >= 1 (input). A file
longer than ``max_rows`` is replayed bounded: the first ``max_rows`` rows, and the trace says the
rest was not read. Rows whose input + output exceed ``max_context`` are skipped and counted.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ConfigError

FORMATS = ("auto", "generic", "mooncake", "burstgpt")
MAX_ROWS = (
    100_000  # the most rows any replay reads (a trace of 10 M rows is cut, and says so)
)
MAX_LINE_CHARS = 100_000
READ_FACTOR = 10  # rows read at most, per row replayed (skipped rows included)


@dataclass
class TraceRow:
    t_s: float  # arrival, seconds from the trace's first row
    input_tokens: int
    output_tokens: int
    session: str | None = None
    hash_ids: list[int] = field(default_factory=list)
    row: int = 0  # 1-based row in the file


@dataclass
class Trace:
    rows: list[TraceRow]
    info: dict[str, Any]


def _fail(path: Path, row: int | None, what: str) -> ConfigError:
    where = f"row {row}" if row else None
    return ConfigError(what, file=str(path), field=where)


def _int(path: Path, row: int, name: str, v: Any, low: int) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise _fail(path, row, f"{name} is {str(v)[:40]!r}, not a number") from None
    if math.isnan(f) or f != int(f) or int(f) < low:
        raise _fail(path, row, f"{name} is {v!r}: a whole number >= {low} is needed")
    return int(f)


def _hash_block(h: Any) -> int:
    """A prefix hash (any string) as a block id."""
    if isinstance(h, int) and not isinstance(h, bool):
        return h
    return int(hashlib.sha256(str(h).encode()).hexdigest()[:12], 16)


def _layout(first: dict[str, Any], fmt: str, path: Path) -> str:
    if fmt != "auto":
        return fmt
    if "Request tokens" in first or "Timestamp" in first:
        return "burstgpt"
    if "hash_ids" in first and "timestamp" in first and "timestamp_ms" not in first:
        return "mooncake"
    return "generic"


def _fields(
    layout: str, raw: dict[str, Any], path: Path, row: int
) -> tuple[float, int, int, Any, list[int]]:
    """(timestamp in seconds, input, output, session, hash ids) of one raw row."""

    def need(*names: str) -> None:
        missing = [n for n in names if n not in raw or raw[n] in (None, "")]
        if missing:
            raise _fail(
                path, row, f"missing column {', '.join(missing)} ({layout} layout)"
            )

    hashes: Any
    if layout == "burstgpt":
        need("Timestamp", "Request tokens", "Response tokens")
        ts, inp, out = raw["Timestamp"], raw["Request tokens"], raw["Response tokens"]
        scale, session, hashes = 1.0, None, []
    elif layout == "mooncake":
        need("timestamp", "input_length", "output_length")
        ts, inp, out = raw["timestamp"], raw["input_length"], raw["output_length"]
        scale, session = 0.001, raw.get("session_id")
        hashes = raw.get("hash_ids") or []
    else:
        if "timestamp" not in raw and "timestamp_ms" not in raw:
            raise _fail(path, row, "missing column timestamp (or timestamp_ms)")
        need("input_length", "output_length")
        ms = "timestamp_ms" in raw and raw["timestamp_ms"] not in (None, "")
        ts, scale = (raw["timestamp_ms"], 0.001) if ms else (raw["timestamp"], 1.0)
        inp, out, session = (
            raw["input_length"],
            raw["output_length"],
            raw.get("session_id"),
        )
        hashes = raw.get("hash_ids") or []
        if isinstance(hashes, str):  # a CSV cell: ids separated by spaces or semicolons
            hashes = [h for h in hashes.replace(";", " ").split() if h]
        if not hashes and raw.get("prefix_hash") not in (None, ""):
            hashes = [raw["prefix_hash"]]
    try:
        t = float(ts) * scale
    except (TypeError, ValueError):
        raise _fail(path, row, f"timestamp is {str(ts)[:40]!r}, not a number") from None
    if math.isnan(t) or t < 0:
        raise _fail(path, row, f"timestamp is {ts!r}: negative (or not a number)")
    if not isinstance(hashes, list):
        raise _fail(path, row, "hash_ids is not a list")
    return (
        t,
        _int(path, row, "input length", inp, 1),
        out,
        session,
        [_hash_block(h) for h in hashes],
    )


def _raw_rows(path: Path):
    """(row number, dict) of a JSONL or CSV file, lazily (a huge file is never read whole)."""
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        head = fh.read(4096)
        fh.seek(0)
        if head.lstrip()[:1] in ("{", "["):
            for n, line in enumerate(fh, 1):
                if len(line) > MAX_LINE_CHARS:
                    raise _fail(
                        path, n, f"a line of more than {MAX_LINE_CHARS} characters"
                    )
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    raise _fail(path, n, "not a JSON object") from None
                if not isinstance(obj, dict):
                    raise _fail(path, n, "not a JSON object")
                yield n, obj
        else:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:
                raise _fail(path, None, "empty trace (no header row)")
            for n, obj in enumerate(reader, 1):
                yield n, {k.strip(): v for k, v in obj.items() if k is not None}


def read(
    path: str | Path,
    fmt: str = "auto",
    max_rows: int = MAX_ROWS,
    max_context: int | None = None,
) -> Trace:
    """The trace in ``path`` (see the module's docstring): rows with arrival times from its first row."""
    p = Path(path)
    if fmt not in FORMATS:
        raise ConfigError(
            f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})",
            field="trace_format",
        )
    if not p.is_file():
        raise ConfigError("trace file not found", file=str(p))
    rows: list[TraceRow] = []
    layout = None
    skipped = {"failed_in_log": 0, "beyond_context": 0}
    truncated = False
    last_t = None
    for n, raw in _raw_rows(p):
        if (
            len(rows) >= max_rows or n > READ_FACTOR * max_rows
        ):  # bounded: never the whole of a huge file
            truncated = True
            break
        layout = layout or _layout(raw, fmt, p)
        t, inp, out_raw, session, hashes = _fields(layout, raw, p, n)
        if last_t is not None and t < last_t:
            raise _fail(p, n, f"timestamps are not sorted ({t:g} s after {last_t:g} s)")
        last_t = t
        if layout == "burstgpt" and str(out_raw).strip() in ("0", "0.0"):
            skipped["failed_in_log"] += 1
            continue
        out = _int(p, n, "output length", out_raw, 1)
        if max_context is not None and inp + out > max_context:
            skipped["beyond_context"] += 1
            continue
        rows.append(
            TraceRow(
                t, inp, out, None if session in (None, "") else str(session), hashes, n
            )
        )
    if not rows:
        raise _fail(
            p, None, "no replayable rows (every row was skipped, or the file is empty)"
        )
    t0 = rows[0].t_s
    for r in rows:
        r.t_s -= t0
    span = rows[-1].t_s
    info = {
        "file": p.name,
        "sha256": _sha256(p),
        "format": layout,
        "rows": len(rows),
        "skipped": {k: v for k, v in skipped.items() if v},
        "truncated_at": max_rows if truncated else None,
        "span_s": span,
        "rate_rps": (len(rows) - 1) / span if span > 0 else None,
        "sessions": len({r.session for r in rows if r.session}),
        "input_tokens_mean": sum(r.input_tokens for r in rows) / len(rows),
        "output_tokens_mean": sum(r.output_tokens for r in rows) / len(rows),
    }
    return Trace(rows, info)


def _sha256(p: Path, limit: int = 64 << 20) -> str | None:
    """sha256 of the file (None above ``limit`` bytes: a huge trace is named by its size instead)."""
    if p.stat().st_size > limit:
        return None
    return hashlib.sha256(p.read_bytes()).hexdigest()


def describe(info: dict[str, Any]) -> str:
    """One line: what was replayed and what was not."""
    out = f"{info['rows']} rows of {info['file']} ({info['format']}, {info['span_s']:.1f} s)"
    sk = info.get("skipped") or {}
    if sk.get("failed_in_log"):
        out += f"; {sk['failed_in_log']} rows with no response in the log skipped"
    if sk.get("beyond_context"):
        out += f"; {sk['beyond_context']} rows beyond the context skipped"
    if info.get("truncated_at"):
        out += f"; only the first {info['truncated_at']} rows read"
    return out
