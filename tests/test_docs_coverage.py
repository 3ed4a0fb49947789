"""Docs coverage: every task has help text and is on the site's Tasks page; every backend's
settings are documented on the Methodology page; `invoke --list` reads as a manual."""

from __future__ import annotations

import subprocess
import sys

from pipelines.site import manual
from runtime import backends
from tests.conftest import ROOT


def test_every_task_and_option_has_help():
    rows = manual.task_rows()
    names = {n for r in rows for n in [r["name"], *r["aliases"]]}
    assert {
        "model.fetch",
        "bench",
        "validate",
        "site.build",
        "site.serve",
        "all",
        "test",
    } <= names
    for r in rows:
        assert r["synopsis"], f"task {r['name']} has no docstring"
        for o in r["options"]:
            assert o["help"], f"option {o['flag']} of {r['name']} has no help text"


def test_invoke_list_is_the_manual():
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    for r in manual.task_rows():
        assert r["name"] in proc.stdout


def test_tasks_and_backends_are_on_the_site(built_site):
    tasks_html = (built_site / "tasks" / "index.html").read_text()
    for r in manual.task_rows():
        assert f"invoke {r['name']}" in tasks_html
    methodology = (built_site / "methodology" / "index.html").read_text()
    for name in backends.BACKENDS:
        cls = backends.settings_class(name)
        for field in cls.model_fields:
            assert f"<code>{field}</code>" in methodology, (name, field)
