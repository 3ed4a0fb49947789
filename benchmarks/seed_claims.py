"""The seeds, read claim by claim against the built site: a checked count instead of a typed one.

``benchmarks/seed_claims.yaml`` lists every claim type of the five seed documents
(``../shared/seeds/000..004``): one kind of figure or statement a seed makes, and whether the
built site shows that kind of result computed from artifacts (living), shows it without a
dimension the seed has (partial), or does not show it (missing). A living or partial claim names
the page that shows it and short phrases that must appear on that page as evidence; a partial or
missing one says why in one line.

This script checks the evidence against a built site and prints the count per seed:

    python3 -m mkdocs build -d /tmp/site                 # or: invoke site.build --output ...
    python3 benchmarks/seed_claims.py --site /tmp/site   # default --site site/
    python3 benchmarks/seed_claims.py --site /tmp/site --claims other.yaml

A page's text is its main content (the page's <article>; the navigation and the table of
contents around it are left out, and so are <script> and <style>), tags stripped, entities
unescaped, whitespace collapsed; a phrase matches case-insensitively. The report (Markdown) goes
to standard output. Exit status: 0 when every living or partial claim's phrases are on its page;
1 when some are not (each named on standard error: seed, claim, page, phrase); 2 when the claims
file is unreadable or an entry is malformed (one line naming the file, the entry and the field).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CLAIMS = HERE / "seed_claims.yaml"
STATUSES = ("living", "partial", "missing")
_SEED = re.compile(r"^\d{3}$")
_SPACE = re.compile(r"\s+")
# tags that do not break a line of text: "<em>too</em> slow" reads "too slow", "<td>a</td><td>b</td>" reads "a b"
_INLINE = frozenset("a abbr b bdi bdo cite code data dfn em i kbd mark q s samp small span strong sub sup time u var wbr".split())


class ClaimsError(Exception):
    """The claims file cannot be read, or one of its entries is malformed."""


@dataclass(frozen=True)
class Claim:
    seed: str
    id: str
    claim: str
    status: str
    page: str | None
    evidence: tuple[str, ...]
    reason: str | None


@dataclass(frozen=True)
class Unfound:
    """A living or partial claim whose evidence is not on its page."""

    claim: Claim
    phrase: str  # the phrase not found ("" when the page itself is absent)

    def __str__(self) -> str:
        c = self.claim
        what = f"phrase {self.phrase!r} not found" if self.phrase else "page not found"
        return f"seed {c.seed} claim {c.id!r} ({c.status}): {c.page}: {what}"


def _text(entry: dict, key: str, where: str, *, required: bool = True) -> str | None:
    v = entry.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v.strip():
        raise ClaimsError(f"{where}: field {key!r} must be a non-empty string (got {v!r})")
    return v.strip()


def parse_claims(data: object, source: str = "claims") -> list[Claim]:
    """The claims of a loaded YAML document (``{claims: [...]}``), each entry checked."""
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimsError(f"{source}: expected a mapping with a 'claims' list")
    out: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(data["claims"]):
        where = f"{source}: claims[{i}]"
        if not isinstance(entry, dict):
            raise ClaimsError(f"{where}: expected a mapping, got {type(entry).__name__}")
        seed = entry.get("seed")
        if not isinstance(seed, str) or not _SEED.match(seed):
            raise ClaimsError(f"{where}: field 'seed' must be a quoted three-digit string such as \"001\" (got {seed!r})")
        cid = _text(entry, "id", where)
        where = f"{source}: claims[{i}] (seed {seed}, id {cid})"
        if (seed, cid) in seen:
            raise ClaimsError(f"{where}: id used twice for this seed")
        seen.add((seed, cid))
        claim = _text(entry, "claim", where)
        status = entry.get("status")
        if status not in STATUSES:
            raise ClaimsError(f"{where}: field 'status' must be one of {', '.join(STATUSES)} (got {status!r})")
        page, evidence = None, ()
        if status in ("living", "partial"):
            page = _text(entry, "page", where)
            ev = entry.get("evidence")
            if not isinstance(ev, list) or not ev or not all(isinstance(p, str) and p.strip() for p in ev):
                raise ClaimsError(f"{where}: field 'evidence' must be a non-empty list of phrases (got {ev!r})")
            evidence = tuple(p.strip() for p in ev)
        reason = _text(entry, "reason", where, required=status in ("partial", "missing"))
        out.append(Claim(seed, cid, claim, status, page, evidence, reason))
    return out


def load_claims(path: Path) -> list[Claim]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ClaimsError(f"{path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ClaimsError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return parse_claims(data, str(path))


class _MainText(HTMLParser):
    """Text of the page's first <article> (the whole document when it has none), minus scripts and styles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.article: list[str] = []
        self.whole: list[str] = []
        self._depth = 0  # nesting inside the first <article>; -1 once it has closed
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "article" and self._depth >= 0:
            self._depth += 1
        self._space(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag == "article" and self._depth > 0:
            self._depth -= 1
            if self._depth == 0:
                self._depth = -1
        self._space(tag)

    def _space(self, tag: str) -> None:
        if tag in _INLINE:
            return
        self.whole.append(" ")
        if self._depth > 0:
            self.article.append(" ")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.whole.append(data)
        if self._depth > 0:
            self.article.append(data)


def _norm(s: str) -> str:
    return _SPACE.sub(" ", s).strip().casefold()


def page_text(html: str) -> str:
    """A page's main text, normalised for matching (tags stripped, entities unescaped, lower case)."""
    p = _MainText()
    p.feed(html)
    p.close()
    return _norm("".join(p.article if p._depth != 0 else p.whole))


def check(claims: list[Claim], site: Path) -> list[Unfound]:
    """Every living or partial claim's phrases looked up on its page of the built ``site``."""
    texts: dict[str, str | None] = {}
    unfound: list[Unfound] = []
    for c in claims:
        if c.status == "missing":
            continue
        if c.page not in texts:
            f = site / c.page
            texts[c.page] = page_text(f.read_text(encoding="utf-8")) if f.is_file() else None
        text = texts[c.page]
        if text is None:
            unfound.append(Unfound(c, ""))
            continue
        unfound += [Unfound(c, ph) for ph in c.evidence if _norm(ph) not in text]
    return unfound


def counts(claims: list[Claim]) -> dict[str, int]:
    return {s: sum(c.status == s for c in claims) for s in STATUSES}


def tally(label: str, claims: list[Claim]) -> str:
    n = counts(claims)
    return f"{label} {n['living']}/{len(claims)} living, {n['partial']} partial, {n['missing']} missing"


def _cell(s: str) -> str:
    return _SPACE.sub(" ", s).replace("|", "\\|")


def report(claims: list[Claim], seeds: dict | None = None) -> str:
    """The Markdown report: a table per seed, its count, and the total."""
    seeds = seeds or {}
    order = sorted({c.seed for c in claims})
    lines: list[str] = []
    for seed in order:
        mine = [c for c in claims if c.seed == seed]
        meta = seeds.get(seed) or {}
        title = " · ".join(str(meta[k]) for k in ("file", "title") if meta.get(k))
        lines += [f"## S{int(seed)} ({seed}){': ' + title if title else ''}", "",
                  "| claim type | the seed says | status | page | evidence / why not |", "|---|---|---|---|---|"]
        for c in sorted(mine, key=lambda c: STATUSES.index(c.status)):  # stable: the seed's order within a status
            ev = "; ".join(f"“{p}”" for p in c.evidence)
            why = ev if c.status == "living" else (f"{c.reason} (shown: {ev})" if c.evidence else c.reason or "")
            lines.append(f"| {c.id} | {_cell(c.claim)} | {c.status} | {c.page or '—'} | {_cell(why)} |")
        lines += ["", tally(f"S{int(seed)}", mine), ""]
    lines += ["## Total", ""]
    lines += [tally(f"S{int(s)}", [c for c in claims if c.seed == s]) for s in order]
    lines.append(tally("All seeds", claims))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, default=Path("site"), help="a built site directory (default: site/)")
    ap.add_argument("--claims", type=Path, default=CLAIMS, help=f"the claims file (default: {CLAIMS.name} beside this script)")
    args = ap.parse_args(argv)
    try:
        claims = load_claims(args.claims)
        seeds = (yaml.safe_load(args.claims.read_text(encoding="utf-8")) or {}).get("seeds")
    except ClaimsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not (args.site / "index.html").is_file():
        print(f"error: {args.site}: no built site here (no index.html); build one with mkdocs build -d DIR", file=sys.stderr)
        return 2
    unfound = check(claims, args.site)
    sys.stdout.write(report(claims, seeds if isinstance(seeds, dict) else None))
    for u in unfound:
        print(f"evidence not found: {u}", file=sys.stderr)
    if unfound:
        print(f"{len(unfound)} evidence check(s) failed", file=sys.stderr)
    return 1 if unfound else 0


if __name__ == "__main__":
    sys.exit(main())
