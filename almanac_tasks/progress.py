"""Progress printers of the long tasks: one line an event, on stderr, through Rich; text from a
matrix, an artifact, a model or a server is printed as text, never as markup (issue 34)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def bench_printer() -> Callable[[str, dict[str, Any]], None]:
    """The progress of a matrix (`invoke bench`, `invoke serve.*`) on stderr: one line a configuration,
    a finished run with its headline figures (core.metrics, ``headline``)."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False)
    state: dict[str, Any] = {}

    def e(v: Any) -> str:
        """Text from a matrix, an artifact or a server: printed as it is, never as markup."""
        return escape(str(v))

    def on_event(kind: str, info: dict[str, Any]) -> None:
        from core.metrics import METRICS

        if kind == "start":
            console.print(
                f"[bold]matrix {e(info['matrix'])}[/]: {info['total']} configurations on host {e(info['host'])}"
            )
            if info.get("loadavg") is not None and info["loadavg"] > 0.5 * (
                info.get("cores") or 1
            ):
                state["busy"] = (info["loadavg"], info["cores"])
            return
        if kind == "corrupt":
            console.print(
                f"corrupt artifact set aside, measured again: {info['path']} -> {info['moved_to']}"
                f" ({info['error']})",
                style="yellow",
                markup=False,
            )
            return
        if kind == "unhonoured":
            console.print(
                f"matrix {info['matrix']}: setting {info['setting']} ({info['test']}) cannot be honoured: "
                f"{info['why']}; not measured, the sweep goes on",
                style="yellow",
                markup=False,
                soft_wrap=True,  # one line, however narrow the terminal
            )
            return
        if kind not in ("skip", "run", "done"):
            return
        if kind == "run" and state.pop("busy", None) is not None:
            load = os.getloadavg()[0]
            console.print(
                f"[yellow]host busy: load average {load:.2f}; rates measured now may be low "
                "(each artifact records the load it started under)[/]"
            )
        prefix = f"\\[{info['index']}/{info['total']}] {e(info['model'])} · {e(info['test'])}"
        if info.get("swept"):
            prefix += " · " + ", ".join(
                f"{e(k)}={e(v)}" for k, v in info["swept"].items()
            )
        if kind == "skip":
            console.print(
                f"{prefix}: [dim]already measured ({e(info['status'])}): {e(info['path'])}[/]"
            )
        elif kind == "run":
            console.print(f"{prefix}: running…")
        elif kind == "done":
            if info["status"] != "ok":
                console.print(
                    f"{prefix}: [red]failed[/] ({e(info['error']['kind'])}: {e(info['error']['message'])}) "
                    f"-> {e(info['path'])}"
                )
                return
            shown = []
            for name, m in METRICS.items():
                if not m.headline:
                    continue
                s = info["summary"].get(name)
                if s and s.get("mean") is not None:
                    # a share stored as a fraction is shown in % (x 100)
                    k = m.display_scale
                    sd = (
                        f" ± {k * s['stddev']:.{m.decimals}f}"
                        if s.get("stddev") is not None
                        else ""
                    )
                    shown.append(
                        f"{m.label} {k * s['mean']:.{m.decimals}f}{sd} {m.unit} (n={s['n']})"
                    )
            console.print(
                f"{prefix}: [green]ok[/] {e('; '.join(shown))} -> {e(info['path'])}"
            )

    return on_event


def quality_printer() -> Callable[[str, dict[str, Any]], None]:
    """The progress of a quality matrix (`invoke quality.run`) on stderr: one line a suite run."""
    from rich.console import Console
    from rich.markup import escape

    from runtime import backends

    console = Console(stderr=True, highlight=False)

    def e(v: Any) -> str:
        """Text from a matrix, an artifact or a model: printed as it is, never as markup."""
        return escape(str(v))

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "start":
            console.print(
                f"[bold]quality matrix {e(info['matrix'])}[/]: {info['total']} suite runs on host {e(info['host'])}"
            )
            return
        if kind == "corrupt":
            console.print(
                f"corrupt artifact set aside, scored again: {info['path']} -> {info['moved_to']} ({info['error']})",
                style="yellow",
                markup=False,
            )
            return
        style = (
            f" · {info['prompt_style']}"
            if info.get("prompt_style") not in (None, "chat")
            else ""
        )
        prefix = e(
            f"[{info['index']}/{info['total']}] {info['model']} · {info['suite']}{style} ({info['items']} items)"
        )
        if info.get("backend") not in (None, backends.DEFAULT):
            prefix += e(f" · {info['backend']}")
        if info.get("swept"):
            prefix += e(" · " + ", ".join(f"{k}={v}" for k, v in info["swept"].items()))
        if kind == "skip":
            console.print(
                f"{prefix}: [dim]already scored ({e(info['status'])}): {e(info['path'])}[/]"
            )
        elif kind == "run":
            console.print(f"{prefix}: generating…")
        elif kind == "done":
            s = info["summary"]
            lo, hi = s["ci95_low"], s["ci95_high"]
            ci = f", CI95 {100 * lo:.0f}–{100 * hi:.0f}%" if lo is not None else ""
            state = (
                "[green]ok[/]"
                if info["status"] == "ok"
                else f"[red]incomplete[/] ({e(info['error']['message'])})"
            )
            console.print(
                f"{prefix}: {state} {s['passed']}/{s['n']} passed{ci}; degenerate {s['degenerate']} "
                f"-> {e(info['path'])}"
            )

    return on_event
