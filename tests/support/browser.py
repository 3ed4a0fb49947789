"""Headless Chromium on a built site: the site served over loopback, and a page that records
console errors, dialogs and every request that would leave the loopback server (aborted)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@contextlib.contextmanager
def serve_site(site: Path) -> Iterator[str]:
    """The folder served on a free loopback port; yields its base URL."""
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(site)
    )
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def open_page(p, served: str, errors: list[str], outside: list[str], **kw):
    """(browser, page) with network blocked except ``served``; errors and outside requests recorded."""
    browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
    context = browser.new_context(accept_downloads=True, **kw)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))

    def guard(route):
        if route.request.url.startswith(served):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    return browser, page
