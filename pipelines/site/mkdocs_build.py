"""``python -m pipelines.site.mkdocs_build ARGS``: ``mkdocs build ARGS`` that leaves without tearing the
interpreter down.

A build holds the whole loaded set until it ends: millions of small objects. After MkDocs has written the
site and said so, the interpreter's own exit freed them one by one, module by module: 1.4 s of a 13 s
rebuild at 10,000 artifacts over 200 hosts on the 2-core VM, during which the site was built and nothing
was left to do. Here the build runs as ``python -m mkdocs build`` would (MkDocs' own command line, its
messages and its exit status), the exit handlers run (they flush logs and end helpers), output is
flushed, and the process ends at once (``os._exit``): the memory goes back to the system whole.
``invoke site.build`` runs the build this way; ``python -m mkdocs build`` works as always.
"""

from __future__ import annotations

import atexit
import os
import sys


def status(code: object) -> int:
    """The exit status of ``SystemExit(code)``, as the interpreter would make it (a message is printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    from mkdocs.__main__ import cli

    try:
        cli.main(
            args=["build", *argv], prog_name="mkdocs"
        )  # exits: click's standalone mode
        return 0
    except SystemExit as exc:
        return status(exc.code)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    atexit._run_exitfuncs()  # what the interpreter runs at exit (logging's flush among them)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
