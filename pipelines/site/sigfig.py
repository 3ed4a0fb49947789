"""A figure to so many significant figures, as the pages show it and the site check reads it back (light:
the check after a build imports it without the fact layer)."""

from __future__ import annotations

import math


def sig(x: float | None, digits: int = 2) -> str:
    """``x`` to ``digits`` significant figures, thousands separated (79.3 -> 79, 0.0123 -> 0.012)."""
    if x is None or not math.isfinite(x):
        return "—"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    places = digits - 1 - mag  # negative: round to tens, hundreds, ...
    rounded = round(x, places)
    if (
        rounded and math.floor(math.log10(abs(rounded))) > mag
    ):  # 99.6 -> 100: one digit fewer after the point
        places -= 1
        rounded = round(x, places)
    return f"{rounded:,.{max(0, places)}f}"
