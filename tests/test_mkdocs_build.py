"""`python -m pipelines.site.mkdocs_build` (what `invoke site.build` runs): MkDocs' own build, its messages and its
exit status, leaving without the interpreter's teardown. Real builds of a small site with the project's hooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.site import mkdocs_build
from tests.support.committed import committed_data
from tests.test_page_worker import _small_site

ROOT = Path(__file__).resolve().parents[1]


def _run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "pipelines.site.mkdocs_build", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.integration  # two small site builds
def test_the_build_says_and_exits_as_mkdocs_build_does(tmp_path):
    data = committed_data(tmp_path / "data", only=["models.yaml"])
    fine = _small_site(tmp_path / "a", "# Last\n\nAll [fine](p00.md).\n")
    proc = _run(data, "--strict", "-f", str(fine), "--site-dir", str(tmp_path / "s1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Documentation built in" in proc.stderr
    assert (tmp_path / "s1" / "p11" / "index.html").is_file()
    warned = _small_site(tmp_path / "b", "# Last\n\nSee [gone](gone.md).\n")
    proc = _run(data, "--strict", "-f", str(warned), "--site-dir", str(tmp_path / "s2"))
    assert proc.returncode == 1
    assert "Aborted with 1 warnings in strict mode!" in proc.stdout
    proc = _run(data, "--no-such-option")
    assert proc.returncode == 2 and "No such option" in proc.stderr


def test_an_exit_status_is_the_interpreters(capsys):
    assert [mkdocs_build.status(c) for c in (None, 0, 3)] == [0, 0, 3]
    assert mkdocs_build.status("Aborted: no config") == 1
    assert capsys.readouterr().err == "Aborted: no config\n"
