"""`invoke compare`: two selections of stored results, configuration by configuration."""

from __future__ import annotations

from pathlib import Path

from invoke import Context, Exit, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import block, written


@task(
    help={
        "baseline": "Selection A, the baseline: key=value pairs, e.g. host=vm,build=ordinary "
        "(keys: host, build, backend, model, test, since, until, artifacts, id; a|b for several values).",
        "candidate": "Selection B, the candidate; same syntax: e.g. host=lent-h100 or build=threads-halved.",
        "out": "Write the table to OUT.md, OUT.json and OUT.csv (default: build/compare/compare).",
        "fail_on_loss": "Exit 1 when a shared configuration loses by more than this many percent (CI gate).",
        "root": "Run artifacts folder (default: data/runs).",
    }
)
@user_errors
def compare(
    c: Context,
    baseline: str,
    candidate: str,
    out: str = "build/compare/compare",
    fail_on_loss: str = "",
    root: str = "",
) -> None:
    """Compare two selections of results: each shared configuration, both values, ratio with CI95, verdict.

    Exit 2 with one line when a selection matches nothing or the two share no configuration."""
    from core.records import run as record
    from pipelines import compare as cmp

    try:
        threshold = float(fail_on_loss) if str(fail_on_loss).strip() else None
    except ValueError:
        raise Exit(
            f"error: --fail-on-loss: {fail_on_loss!r} is not a number (percent)", code=2
        ) from None
    if threshold is not None and threshold < 0:
        raise Exit(
            f"error: --fail-on-loss: {threshold:g} is negative (a loss threshold in percent)",
            code=2,
        )
    sel_a, sel_b = (
        cmp.parse_selection(baseline, "--baseline"),
        cmp.parse_selection(candidate, "--candidate"),
    )
    res = cmp.compare(record.read_all(root or None), sel_a, sel_b)
    block(cmp.markdown(res))
    paths = cmp.write_outputs(res, Path(out))
    written(paths)
    if threshold is not None:
        bad = res.losses_beyond(threshold)
        if bad:
            raise Exit(
                f"{len(bad)} configuration(s) lost more than {threshold:g}%: "
                + "; ".join(f"{r.model} {r.test} B/A={r.ratio:.3f}" for r in bad),
                code=1,
            )
