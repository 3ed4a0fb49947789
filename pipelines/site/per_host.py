"""Pages that grow with the fleet get one page per host.

A page organised by host (leaderboard, serving, comparisons, optimization tracks, hosts, roles)
stays one page while the data holds at most ``SPLIT_ABOVE`` hosts with something to show on
it. Beyond that its page becomes an index (one row per host: the machine, how much it
measured, when, and a link) and every host gets its own page, ``<page>/<host id>/``, rendered
by the same function from that host's artifacts only. No page then carries the whole fleet,
so page weight stays bounded by one host's data while the build stays linear.

The per-host Markdown files are written by docs/gen_pages.py (mkdocs-gen-files) from
``generated_pages``; the macros call ``render``. Host ids are validated by the run schema
(``^[a-z0-9][a-z0-9-]*$``) and checked again here before they name a file or enter a macro call.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.records.host import HostRecord
from core.registry import Registry
from pipelines import dataset
from pipelines.site import figures, page_cache
from pipelines.site.markdown import (
    admonition,
    as_text,
    cell,
    code,
    link,
    nbytes,
    num,
    rebase_links,
    table,
)

SPLIT_ABOVE = 4  # hosts shown on one page; more get one page per host
_HOST_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class SplitPage:
    """A page that splits per host: ``render(run_docs, host)`` renders it for the given runs
    (every host's, or one host's); ``relevant(run)`` says whether a run puts its host on it."""

    name: str  # docs/<name>.md; per-host pages at docs/<name>/<host>.md
    title: str
    noun: str  # what the per-host count counts
    relevant: Callable[[Any], bool]
    render: Callable[[list[Any], str | None], str]
    fingerprints: bool = False  # a host known only from its host artifact (a probe, no run) gets a page too
    # whether a host's relevant runs give the page something to show (default: any relevant run); a page
    # whose content needs several runs together (a sweep) says so here, so that no host gets an empty page
    shows: Callable[[list[Any]], bool] | None = None
    always: bool = False  # one page per host however few hosts there are (the page itself is the index)
    # what one host's page reads beyond its host's artifacts and the fleet's shared ones (pipelines.site.
    # page_cache): digests of those inputs (pipelines.site.page_inputs), never the page's own output, part of
    # the page's cache key (None: nothing else)
    reads: Callable[[str], str] | None = None


PAGES: Registry[SplitPage] = Registry("per-host page")


def register(page: SplitPage) -> None:
    PAGES.add(page.name, page, stacklevel=2)


def _by_host(ds: dataset.Dataset) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for r in ds.runs:
        groups.setdefault(r.host_id, []).append(r)
    return groups


def runs_by_host() -> dict[str, list[Any]]:
    """The loaded set's runs grouped by host (oldest first within a host)."""
    return dataset.load().derived("runs_by_host", _by_host)


def host_artifacts() -> dict[str, HostRecord]:
    """Host id -> its newest host artifact (fingerprint, bandwidth probe)."""
    return dataset.load().derived(
        "newest_host_artifact", lambda ds: {d.host_id: d for d in ds.hosts}
    )  # oldest first: newest wins


def hosts_of(name: str) -> dict[str, list[Any]]:
    """Host -> its relevant runs, for the hosts that have any (and, on a page that shows
    fingerprints, the hosts known from a host artifact alone, with no run); sorted by host id.
    Computed once per loaded set (a page's ``shows`` may look at a host's runs together)."""
    return dataset.load().derived(f"hosts_of:{name}", lambda ds: _hosts_of(name))


def _hosts_of(name: str) -> dict[str, list[Any]]:
    page = PAGES[name]
    out = {}
    for host, runs in runs_by_host().items():
        rel = [r for r in runs if page.relevant(r)]
        if rel and (page.shows is None or page.shows(rel)):
            out[host] = rel
    if page.fingerprints:
        for host in host_artifacts():
            out.setdefault(host, [])
    return dict(sorted(out.items()))


PAGE_HOSTS = (
    20  # a page with a section per host that does not split shows this many hosts
)


def page_hosts(hosts: list[str], runs: list[Any]) -> tuple[list[str], str]:
    """The hosts a page with a section per host shows (in their order) and the line saying which were left
    out ("" when none): past PAGE_HOSTS, the most recently measured (a page stays under 1 MB)."""
    if len(hosts) <= PAGE_HOSTS:
        return hosts, ""

    newest: dict[str, str] = {}
    for r in runs:
        if r.created > newest.get(r.host_id, ""):
            newest[r.host_id] = r.created
    keep = set(
        sorted(hosts, key=lambda h: (newest.get(h, ""), h), reverse=True)[:PAGE_HOSTS]
    )
    return [h for h in hosts if h in keep], (
        f"The {PAGE_HOSTS} most recently measured of {len(hosts):,} hosts are shown here (a page stays "
        "under 1 MB)."
    )


def is_split(name: str) -> bool:
    return PAGES[name].always or len(hosts_of(name)) > SPLIT_ABOVE


MAX_STEM = (
    100  # a host id longer than this (a long host name) gets a shortened file name
)


def page_file(name: str, host: str) -> str:
    if not _HOST_ID.match(host):
        raise ValueError(f"host id {host!r} is not a valid id (^[a-z0-9][a-z0-9-]*$)")
    # "index" is a valid host id but would land on the page's own URL (<name>/index.md is <name>.md's
    # place): that one host gets "_index", which no host id can be (no underscores in ids). An id longer
    # than a file name may be keeps its start and a digest of the whole ("_" again: no id collides with it)
    if host == "index":
        stem = "_index"
    elif len(host) > MAX_STEM:
        stem = (
            f"{host[: MAX_STEM - 10]}_{hashlib.sha256(host.encode()).hexdigest()[:8]}"
        )
    else:
        stem = host
    return f"{name}/{stem}.md"


def generated_pages() -> list[tuple[str, str]]:
    """(path under docs/, Markdown) of every per-host page this build needs."""
    out = []
    for name, page in PAGES.items():
        if not is_split(name):
            continue
        labels = host_labels()
        for host in hosts_of(name):
            path = page_file(name, host)
            # kept out of the search index (front matter): hundreds of near-identical pages would make the
            # index (and Material's indexing, which is quadratic in a page's headings) grow with the fleet
            # while adding nothing a reader searches for; the page's index (docs/<name>.md) is indexed
            # and names every host
            label = labels.get(host, host)
            # the page's <title> from the front matter, as text no reader takes for markup (as_text): the theme
            # writes a title taken from the heading through striptags, which unescapes what cell() escaped,
            # and a label is artifact text
            title = _yaml_string(as_text(f"{page.title}: {label}"))
            # the page and host in the front matter (mkdocs-macros gives its fields to the page as variables),
            # so that every per-host page has one body, which Jinja compiles once (docs/macros.py), not once
            # per page; all three are YAML double-quoted strings (_yaml_string) that read back as written
            out.append(
                (
                    path,
                    f"---\ntitle: {title}\nsearch:\n  exclude: true\n"
                    f"almanac_split: {_yaml_string(name)}\nalmanac_host: {_yaml_string(host)}\n---\n\n"
                    f"{HOST_PAGE_BODY}\n",
                )
            )
    return out


#: the body of every per-host page (its page and host are in its front matter)
HOST_PAGE_BODY = "{{ split_host_page(almanac_split, almanac_host) }}"


def _yaml_string(text: str) -> str:
    """``text`` as a YAML double-quoted string that PyYAML (MkDocs' front matter) reads back as written:
    JSON's escapes, every character outside printable ASCII escaped, one past U+FFFF as ``\\U`` (JSON's
    surrogate pair reads back as two lone surrogates, and MkDocs then drops the whole front matter: the page
    loses its title and its variables), and a lone surrogate, which no page can hold, as U+FFFD."""
    out = []
    for c in json.dumps(text, ensure_ascii=False):
        o = ord(c)
        if 0x20 <= o < 0x7F:
            out.append(c)
        elif 0xD800 <= o <= 0xDFFF:
            out.append("\\ufffd")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


def host_page(name: str, host: str) -> str:
    """One host's page of the page ``name`` (a generated page's body: :data:`HOST_PAGE_BODY`): its heading,
    the line that says what it is, and :func:`render`'s body for the host."""
    page = PAGES[name]
    label = host_labels().get(host, host)
    why = (
        "one page per host"
        if page.always
        else f"one page per host once more than {SPLIT_ABOVE} hosts have data"
    )
    return (
        f"# {page.title}: {figures.host(label, host)}\n\n"
        f"Host {code(host)}. One host's part of the [{page.title}](../{name}.md) page ({why}).\n\n"
        + render(name, host)
    )


def prefill() -> None:
    """Every per-host page this build shows, rendered into the page cache ahead over ALMANAC_PAGE_WORKERS processes
    (pipelines.site.page_cache.fill) before the page loop, which then finds each one there. The pages
    that split are those registered (pipelines.site.split_pages registers them: its importer, the build's
    hooks, imports it first; importing it here would make the two modules import each other)."""
    jobs = [(name, host) for name in PAGES if is_split(name) for host in hosts_of(name)]
    page_cache.fill(
        jobs,
        lambda job: render(*job),
        lambda job: not page_cache.is_cached((job[0],), job[1], _reads(*job)),
    )


def host_labels() -> dict[str, str]:
    """Every host's label (pipelines.hostnames), from the loaded set's runs and host artifacts; once per
    build (hosts.yaml can change between two builds of one loaded set). Every per-host page asks: asked of
    the set each time, it cost a pass over every artifact per page (at 100,000 artifacts over 500 hosts,
    about 1,600 passes)."""
    return dict(page_cache.per_build("labels", _labels))


def _labels() -> dict[str, str]:
    from pipelines import hostnames

    return hostnames.labels(list(dataset.load().runs) + list(dataset.load().hosts))


def _machine(h: dict[str, Any]) -> tuple[str, str, str]:
    from core.hostlabel import cpu_label, gpus_label

    return (
        cpu_label(h["cpu"]),
        gpus_label(h.get("gpus") or []) or "none",
        nbytes(h["memory_bytes"]),
    )


def index(name: str) -> str:
    """The page's body once it is split: one row per host, linked to its page."""
    page = PAGES[name]
    hosts = hosts_of(name)
    rows = []
    probes = host_artifacts()
    labels = host_labels()
    for host, runs in hosts.items():
        newest = runs[-1] if runs else probes[host]
        cpu, gpus, ram = _machine(newest.host)
        rows.append(
            [
                figures.host(
                    labels.get(host, host),
                    host,
                    link(labels.get(host, host), page_file(name, host)),
                )
                + "<br>"
                + code(host),
                cell(cpu),
                cell(gpus),
                ram,
                num(len(runs), 0),
                cell(newest.created[:16].replace("T", " ")),
            ]
        )
    lead = (
        f"{len(hosts):,} hosts have {page.noun}: each has its own page, linked below."
        if page.always
        else f"{len(hosts):,} hosts have {page.noun}, more than one page shows (up to "
        f"{SPLIT_ABOVE}): each host has its "
        "own page, linked below and rendered the same way from that host's artifacts only."
    )
    return "\n".join(
        [
            lead,
            "",
            table(
                ["host", "CPU", "GPUs", "RAM", page.noun, "newest (UTC)"],
                rows,
                ["l", "l", "l", "r", "r", "l"],
            ),
        ]
    )


def render(name: str, host: str | None = None) -> str:
    """The page body: the whole page, the index of a split page, or one host's page."""
    page = PAGES[name]
    if host is None:
        if is_split(name):
            return index(name)
        return page.render(list(dataset.load().runs), None)
    runs = runs_by_host().get(host)
    if runs is None:
        if not (page.fingerprints and host in host_artifacts()):
            return admonition(
                "warning", "No data", f"No artifact from host {code(host)}."
            )
        runs = []
    host_runs = list(runs)
    # rendered as for docs/<name>.md, served one folder deeper (docs/<name>/<host>.md); from the page cache
    # when nothing the page is made from changed (one more host's run re-renders that host's pages only)
    return page_cache.cached(
        (name,),
        host,
        lambda: rebase_links(page.render(host_runs, host), 1),
        extra=_reads(name, host),
    )


def _reads(name: str, host: str) -> Callable[[], str] | None:
    reads = PAGES[name].reads
    return None if reads is None else lambda: reads(host)
