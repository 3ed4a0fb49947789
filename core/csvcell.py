"""CSV written for spreadsheets: every cell that a spreadsheet would run as a formula is neutralised.

A cell starting with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return, which some
spreadsheets strip before looking) is read as a formula by Excel, LibreOffice and Google Sheets:
``=HYPERLINK("…","click")`` in a model or host name would become a live link in a downloaded
table (OWASP "CSV injection"). Such a cell gets a leading ``'``, which spreadsheets show as text
and do not display. A plain number (``-3.5``, ``+12%``, ``-1e-3``) is left as it is: it is read as
a number, not a formula, and the data stays numeric. Every CSV the site or ``invoke compare``
writes goes through :func:`writer` or :func:`dict_writer`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from typing import IO, Any

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN = frozenset(
    {"-", "+", "--"}
)  # a lone dash ("no value") is text to every spreadsheet
_NUMBER = re.compile(r"[-+]?(\d[\d,]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?%?")


def cell(value: Any) -> Any:
    """``value`` safe for a spreadsheet: strings that would start a formula get a leading ``'``; a
    carriage return becomes a newline (``csv`` does not quote a lone CR under a ``\\n`` line
    terminator, and a reader would start a new row, and a new first cell, there)."""
    if not isinstance(value, str):
        return value
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
        if value.startswith("\n"):
            return "'" + value
    if (
        value.startswith(TRIGGERS)
        and value not in _PLAIN
        and not _NUMBER.fullmatch(value)
    ):
        return "'" + value
    return value


class _Writer:
    def __init__(self, inner: Any):
        self._inner = inner

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._inner.writerow([cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class _DictWriter:
    def __init__(self, inner: csv.DictWriter):
        self._inner = inner

    def writeheader(self) -> Any:
        return self._inner.writer.writerow([cell(f) for f in self._inner.fieldnames])

    def writerow(self, row: Mapping[str, Any]) -> Any:
        return self._inner.writerow({k: cell(v) for k, v in row.items()})

    def writerows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(fh: IO[str], **kwargs: Any) -> _Writer:
    """``csv.writer`` whose cells are neutralised (headers included)."""
    return _Writer(csv.writer(fh, **kwargs))


def dict_writer(fh: IO[str], fieldnames: list[str], **kwargs: Any) -> _DictWriter:
    """``csv.DictWriter`` whose cells are neutralised (headers included)."""
    return _DictWriter(csv.DictWriter(fh, fieldnames=fieldnames, **kwargs))
