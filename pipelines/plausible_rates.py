"""Decode rates against a physical bound: the host's measured memory bandwidth (``invoke validate``).

Generating a token reads every weight in use once, so a decode rate cannot exceed the host's
memory bandwidth divided by the bytes read per token (pipelines.roofline, from the host's newest
``host.probe``). Measured rates reach 0.3-0.7 of that bound here; a rate several times above it was
not measured on that host (a forged or mislabelled artifact, a lying server), unless the model's
bytes per token fit in the last-level cache (then the DRAM bound does not apply, and the row says
so). Where the host has no probe, or the model no local file, there is no bound and no verdict.
"""

from __future__ import annotations

from pathlib import Path

from core.paths import relpath
from pipelines import roofline, runs

# A rate above this multiple of its bandwidth bound is not a measurement (the committed runs reach
# at most 0.7 of it; caches and prefetching never make a model larger than the cache several times faster).
MAX_EFFICIENCY = 4.0


def beyond_bound(root: Path) -> list[str]:
    """One line per current decode measurement above MAX_EFFICIENCY times its bandwidth bound,
    naming the file, the metric and both figures."""
    run_docs = runs.load_runs(root)
    where = {r.id: r.path for r in run_docs}
    out = []
    for row in roofline.roofline_rows(run_docs, roofline.load_hosts(root)):
        eff = row.get("efficiency")
        if eff is None or row.get("fits_llc") or eff <= MAX_EFFICIENCY:
            continue
        out.append(
            f"{relpath(where.get(row['id']) or row['id'])}: summary.{row['metric']}.mean: implausible: "
            f"{row['measured']:,.4g} t/s is {eff:,.1f} times the decode bound of host {row['host_id']} "
            f"({row['bound']:,.4g} t/s: its measured memory bandwidth over {row['bytes']['total']:,.0f} bytes "
            f"read a token); at most {MAX_EFFICIENCY:g} times is a measurement"
        )
    return out
