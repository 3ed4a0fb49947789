"""benchmarks/seed_claims.py: the seed claims' evidence is looked up on built pages, and the committed
claims file is well formed (every seed, every field, a valid status)."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks import seed_claims as sc

PAGE = """<!doctype html><html><head><title>Alpha page</title><style>.x{{}}</style></head><body>
<nav>Navigation only phrase</nav>
<article class="md-content__inner md-typeset">
<h1 id="alpha">Alpha heading<a class="headerlink" href="#alpha">¶</a></h1>
<p>Reasons: <em>too slow</em>, <em>degenerate</em> &amp; more</p>
<table><tr><td>left cell</td><td>right cell</td></tr></table>
{body}
<script>var s = "script only phrase";</script>
</article>
<footer>Footer only phrase</footer>
</body></html>"""


def _site(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text(PAGE.format(body="<p>Corpus of 12 tokens</p>"), encoding="utf-8")
    (root / "sub" / "index.html").write_text(PAGE.format(body="<details><summary>Beta fold</summary>"
                                                        "<p>Folded BETA figure</p></details>"), encoding="utf-8")
    return root


def _claims(phrase: str) -> dict:
    return {"claims": [
        {"seed": "000", "id": "one", "claim": "a figure", "status": "living", "page": "index.html",
         "evidence": ["ALPHA HEADING", "reasons: too slow, degenerate & more", "left cell right cell"]},
        {"seed": "000", "id": "two", "claim": "another", "status": "partial", "page": "sub/index.html",
         "evidence": [phrase], "reason": "a dimension is missing"},
        {"seed": "001", "id": "three", "claim": "not there", "status": "missing", "reason": "no model here"},
    ]}


def test_evidence_found_on_the_pages(tmp_path):
    site = _site(tmp_path / "site")
    claims = sc.parse_claims(_claims("folded beta figure"))
    assert sc.check(claims, site) == []
    assert sc.tally("S0", [c for c in claims if c.seed == "000"]) == "S0 1/2 living, 1 partial, 0 missing"
    assert sc.tally("All seeds", claims) == "All seeds 1/3 living, 1 partial, 1 missing"


def test_missing_evidence_is_reported(tmp_path):
    site = _site(tmp_path / "site")
    for phrase in ("gamma figure", "navigation only phrase", "footer only phrase", "script only phrase", "alpha page"):
        claims = sc.parse_claims(_claims(phrase))
        unfound = sc.check(claims, site)
        assert [(u.claim.id, u.claim.page, u.phrase) for u in unfound] == [("two", "sub/index.html", phrase)], phrase
        assert f"claim 'two' (partial): sub/index.html: phrase {phrase!r} not found" in str(unfound[0])
    gone = _claims("beta")
    gone["claims"][1]["page"] = "nowhere/index.html"
    [u] = sc.check(sc.parse_claims(gone), site)
    assert u.phrase == "" and "nowhere/index.html: page not found" in str(u)


def test_main_exit_status_and_report(tmp_path, capsys):
    site = _site(tmp_path / "site")
    good, bad, broken = tmp_path / "good.yaml", tmp_path / "bad.yaml", tmp_path / "broken.yaml"
    good.write_text(yaml.safe_dump(_claims("folded beta figure")), encoding="utf-8")
    bad.write_text(yaml.safe_dump(_claims("gamma figure")), encoding="utf-8")
    entries = _claims("beta")
    del entries["claims"][0]["page"]
    broken.write_text(yaml.safe_dump(entries), encoding="utf-8")

    assert sc.main(["--site", str(site), "--claims", str(good)]) == 0
    out, err = capsys.readouterr()
    assert "S0 1/2 living, 1 partial, 0 missing" in out and "S1 0/1 living, 0 partial, 1 missing" in out
    assert "| three | not there | missing | — | no model here |" in out and err == ""

    assert sc.main(["--site", str(site), "--claims", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert "evidence not found: seed 000 claim 'two' (partial): sub/index.html: phrase 'gamma figure' not found" in err

    assert sc.main(["--site", str(site), "--claims", str(broken)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {broken}: claims[0] (seed 000, id one): field 'page'")


def test_committed_claims_file_is_complete():
    claims = sc.load_claims(sc.CLAIMS)
    data = yaml.safe_load(sc.CLAIMS.read_text(encoding="utf-8"))
    assert {c.seed for c in claims} == {"000", "001", "002", "003", "004"} == set(data["seeds"])
    for entry, c in zip(data["claims"], claims):
        assert set(entry) <= {"seed", "id", "claim", "status", "page", "evidence", "reason"}, entry
        assert c.status in sc.STATUSES and c.id and c.claim
        if c.status in ("living", "partial"):
            assert c.page and c.page.endswith(".html") and c.evidence, c.id
        else:
            assert c.page is None and not c.evidence, c.id
        if c.status in ("partial", "missing"):
            assert c.reason, c.id
    for seed in data["seeds"]:
        assert any(c.status == "living" for c in claims if c.seed == seed), seed
