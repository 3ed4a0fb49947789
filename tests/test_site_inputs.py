"""`invoke all` with nothing new skips the site build: the inputs' digest (pipelines/site/inputs.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipelines.site import inputs

ROOT = Path(__file__).resolve().parents[1]


def test_digest_follows_every_input(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data" / "matrices", data / "matrices")
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    first = inputs.digest(ROOT)
    assert inputs.digest(ROOT) == first  # same inputs, same digest
    (data / "runs").mkdir()
    (data / "runs" / "new.json").write_text("{}")
    second = inputs.digest(ROOT)
    assert second != first  # a new artifact
    (data / "runs" / "new.json").write_text("{} ")
    assert inputs.digest(ROOT) != second  # an artifact changed in place
    (data / "runs" / "new.json").unlink()
    assert inputs.digest(ROOT) == first


def test_up_to_date_needs_the_stamp_and_the_site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    assert not inputs.up_to_date(site, "abc")
    (site / "index.html").write_text("<html></html>")
    assert not inputs.up_to_date(site, "abc")  # never stamped: built by something else
    inputs.mark(site, "abc")
    assert inputs.up_to_date(site, "abc")
    assert not inputs.up_to_date(site, "abd")  # an input changed
    (site / "index.html").unlink()
    assert not inputs.up_to_date(site, "abc")  # the site is gone
