"""The example kind's site builder (tests/support/example_kind.py): a section of its own, one row
per run with the echo's figures. Imported with the site through ``ALMANAC_SITE_KINDS``."""

from __future__ import annotations

from typing import Any

from pipelines.site.kinds import KindSite, register
from pipelines.site.markdown import cell, link, num, run_link, table


def echo_section(runs: list[Any]) -> str:
    rows = []
    for r in runs:
        s = r.stat("echo_ms")
        rows.append(
            [
                link(r.id, run_link(r.id, "kinds")),
                cell(r.details.echoed),
                num(s.mean if s else None, 3),
                num(s.n if s else None, 0),
            ]
        )
    return "Every echo run, with what came back.\n\n" + table(
        ["run", "echoed", "round trip (ms)", "n"], rows
    )


SITE = register(KindSite("echo", section=echo_section, title="Echo"))
