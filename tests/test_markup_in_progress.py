"""Text from servers, remotes and matrices is printed as text, never as Rich markup (issue 34): a model
name, a swept value or a server's error of ``[/]`` or ``[link=…]`` neither crashes nor styles a progress
line, and a progress line that cannot be shown never loses a host's run or the per-host summary."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from almanac_tasks.progress import bench_printer
from runtime.remote import controller
from runtime.remote.controller import HostOutcome, _shown_or_skipped

MARKUP = ["[/]", "[link=javascript:alert(1)]click[/link]", "[bold red]x", "[/bold]"]


def _printer(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(
        "rich.console.Console",
        lambda **kw: Console(
            file=buf, width=300, **{k: v for k, v in kw.items() if k != "stderr"}
        ),
    )
    return bench_printer(), buf


@pytest.mark.parametrize("text", MARKUP)
def test_the_bench_progress_line_prints_markup_as_text(monkeypatch, text):
    on_event, buf = _printer(monkeypatch)
    base = {
        "index": 1,
        "total": 2,
        "model": text,
        "test": text,
        "swept": {"api_model": text},
        "path": text,
    }
    on_event("start", {"matrix": text, "total": 2, "host": text})
    on_event("run", base)
    on_event(
        "done", {**base, "status": "failed", "error": {"kind": text, "message": text}}
    )
    on_event(
        "done",
        {
            **base,
            "status": "ok",
            "summary": {
                "probe_success_rate": {"mean": 0.8333, "stddev": 0.408, "n": 6}
            },
        },
    )
    out = buf.getvalue()
    assert out.count(text) >= 6, out
    # a share is shown in % (83.3 %), not as the stored fraction followed by "%"
    assert "Probe success rate 83.3 ± 40.8 % (n=6)" in out


def test_a_remote_run_with_markup_keeps_its_per_host_summary(
    monkeypatch, tmp_path, capsys
):
    from runtime.remote import cli

    inv = tmp_path / "hosts.yaml"
    inv.write_text(
        "schema_version: 1\nhosts:\n  box:\n    address: 127.0.0.1\n    user: u\n"
    )

    def fake_run_hosts(hosts, matrix, *, force, retry_failed, progress):
        # what a remote host sends back: its events and an error message in markup (no ssh here: the
        # remote side's text is the input under test; tests/test_remote.py runs the real sshd path)
        p = _shown_or_skipped(progress)
        for t in MARKUP:
            p("box", "run", {"model": t, "test": t, "index": 1})
            p("box", "done", {"model": t, "test": t, "status": t})
        p(
            "box",
            "finished",
            {"status": "failed", "message": "[/] remote says [link=x]no"},
        )
        return [HostOutcome("box", "failed", "error", "[/]", log=Path("/tmp/x.log"))]

    monkeypatch.setattr(controller, "run_hosts", fake_run_hosts)
    ok = cli.bench_remote("m", hosts=["box"], labels=[], inventory=str(inv))
    err = capsys.readouterr().err
    assert ok is False
    assert (
        "box: failed (error), 0 measured, 0 failed, 0 artifacts fetched; log /tmp/x.log"
        in err
    )


def test_a_progress_display_that_fails_never_loses_the_run(capsys):
    def broken(name, event, info):
        raise ValueError("cannot show")

    _shown_or_skipped(broken)("box", "run", {})
    assert (
        "box: a progress line could not be shown (ValueError)"
        in capsys.readouterr().err
    )
