"""How a task reports: results on stdout, progress and problems on stderr, and the lines
several tasks share (a matrix's counts, the files written), worded once."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def say(*lines: object, flush: bool = False) -> None:
    """Result lines, on stdout; ``flush`` where a long step follows (its line shows before it)."""
    for line in lines:
        print(line, flush=flush)


def note(*lines: object) -> None:
    """Progress and problems, on stderr: what a user watches, not what a script reads."""
    for line in lines:
        print(line, file=sys.stderr, flush=True)


def matrix_done(
    report: Any,
    *,
    what: str = "matrix",
    measured: str = "measured",
    failed: str = "failed",
    skipped: str = "already measured",
) -> None:
    """The last line of a matrix: how many configurations were measured, failed, already there."""
    say(
        f"{what} {report.matrix}: {len(report.measured)} {measured}, "
        f"{len(report.failed)} {failed}, {len(report.skipped)} {skipped}"
    )


def written(paths: Iterable[Path | str]) -> None:
    """The files a task wrote, on one line."""
    say("written: " + ", ".join(str(p) for p in paths))


def block(text: str) -> None:
    """A rendered block (a Markdown table, a plan) on stdout, as it is: it ends its own lines."""
    print(text, end="")
