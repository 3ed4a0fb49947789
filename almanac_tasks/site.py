"""`invoke site.*`: build the site from data/ (built beside the old one and swapped in),
check a built site for contradictions, serve it with live reload."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from invoke import Collection, Context, Exit, task

from almanac_tasks.errors import user_errors
from almanac_tasks.paths import ROOT
from almanac_tasks.report import note, say
from almanac_tasks.shell import run


@task(
    default=True,
    help={
        "output": "Folder to build into (default: site/).",
        "wait": "Seconds to wait for another build of the same folder to finish (default 0: exit at once).",
    },
)
@user_errors
def build(c: Context, output: str = "site", wait: float = 0.0) -> None:
    """Build the site from data/ alone (strict: any macro error or broken link fails it), then check it: a
    contradiction between its pages (`invoke site.check`) fails the build too."""
    build_site(c, output, wait_s=float(wait))


def build_site(
    c: Context, output: str, if_changed: bool = False, wait_s: float = 0.0
) -> None:
    """Build into ``output`` under its build lock (one build per folder at a time); with
    ``if_changed``, skip it when the site there was built from the same inputs."""
    from pipelines.site.buildlock import build_lock

    site = (ROOT / output).resolve()
    with build_lock(site, wait_s=wait_s):
        _build_locked(c, site, if_changed)


def _build_locked(c: Context, site: Path, if_changed: bool) -> None:
    from pipelines.site import inputs
    from pipelines.site.buildlock import swap_in

    # only `invoke all` stamps and checks (hashing the inputs costs ~0.1 ms an artifact); a plain build
    # removes the stamp, so the next `invoke all` builds once more
    current = inputs.digest(ROOT) if if_changed else ""
    index = site / "index.html"
    if if_changed and inputs.up_to_date(site, current):
        say(f"site up to date (no input changed since it was built): {index}")
        return
    (site / inputs.STAMP).unlink(missing_ok=True)
    # built beside and swapped in: a reader never sees half a site, and the old one (tens of thousands
    # of files at fleet scale: mkdocs' own clean-up took a sixth of a rebuild) is removed in the background
    fresh = site.with_name(f".{site.name}.building-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    from pipelines.site import handoff  # light: the task holds it while the build runs

    groups = fresh.with_name(f"{fresh.name}.groups.json")
    result = run(
        c,
        # MkDocs' own build, left without the interpreter's teardown (pipelines/site/mkdocs_build.py)
        f"{sys.executable} -m pipelines.site.mkdocs_build --strict --site-dir {shlex.quote(str(fresh))}",
        hide="both",
        # the build reads no input: invoke's thread that forwards stdin would poll it all build long
        in_stream=False,
        env={
            "DISABLE_MKDOCS_2_WARNING": "true",
            "NO_MKDOCS_2_WARNING": "1",
            # the build leaves its fact layer's groups there for the check below (no second load)
            handoff.GROUPS_ENV: str(groups),
        },
    )
    pairs = handoff.take_groups(groups)  # None: figured again for the check
    if result.exited:
        shutil.rmtree(fresh, ignore_errors=True)
    else:
        swap_in(fresh, site)
    if result.exited:
        # the build's own load of data/ turns a bad artifact into one line (pipelines/site/hooks.py):
        # show that line alone; any other failure is a bug and keeps its whole log
        lines = [  # named as the folder the user asked for, not the one built beside it
            ln.replace(str(fresh), str(site))
            for ln in (result.stdout + result.stderr).splitlines()
            if ln.startswith("error: ")
        ]
        if lines:
            raise Exit("\n".join(lines), code=2)
        sys.stderr.write(result.stdout + result.stderr)
        raise Exit(code=result.exited)
    say(f"site built: {index}\n  serve it with: invoke site.serve")
    problems = _report_contradictions(site, pairs)
    if problems:
        # a site whose pages contradict each other is a failed build (the publishing workflow stops here):
        # it stays in place to be looked at, unstamped, so the next `invoke all` builds and checks it again
        raise Exit(
            f"error: the site in {site} was built but {len(problems)} contradiction(s) between its pages "
            "(listed above) make it wrong to publish",
            code=1,
        )
    if current:
        inputs.mark(site, current)


def _report_contradictions(
    site: Path, pairs: set[tuple[str, str]] | None = None
) -> list[str]:
    """The site-wide consistency check (pipelines/site/consistency.py) on a built site: every contradiction,
    one line each (a figure with two values, a rank against a verdict, ...). ``pairs``: the fact layer's
    (work, host) groups as the build left them (pipelines.site.handoff); None: figured from data/."""
    from pipelines.site import consistency

    if pairs is None:
        # the fact layer (and pandas under it) imported only here: a build leaves its groups, and the check
        # after it reads the pages alone (importing it was 3 s of a rebuild on the 2-core VM)
        from pipelines import facts
        from pipelines.runs import load_runs

        missing = consistency.missing_in(facts.of(load_runs()))
    else:
        missing = consistency.missing_from(pairs)
    problems = consistency.check(site, missing=missing)
    if problems:
        note(f"site check: {len(problems)} contradiction(s) between pages:")
        for p in problems:
            note("  " + p)
    else:
        say(
            "site check: every figure reads the same on every page; no rank contradicts a verdict; "
            "every host has one name"
        )
    return problems


@task(help={"output": "The built site's folder (default: site/)."})
@user_errors
def check(c: Context, output: str = "site") -> None:
    """Check a built site for contradictions between its pages (one figure, two values; a rank against a verdict)."""
    site = (ROOT / output).resolve()
    if not (site / "index.html").is_file():
        from core.errors import UserError

        raise UserError(f"no built site in {output}/: run `invoke site.build` first")
    if _report_contradictions(site):
        raise Exit(code=1)


@task(help={"port": "Port on 127.0.0.1 (default 8000)."})
def serve(c: Context, port: int = 8000) -> None:
    """Serve the site with live reload on http://127.0.0.1:PORT/."""
    c.run(
        f"{sys.executable} -m mkdocs serve --dev-addr 127.0.0.1:{int(port)}",
        pty=False,
        env={"DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"},
    )


ns = Collection("site", build, serve, check)
