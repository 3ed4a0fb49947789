"""What a site build leaves for the task that ran it (`invoke site.build`, another process).

The build has the fact layer of the set it rendered; the site check after it would load and figure the
whole set again (at fleet scale a good part of a rebuild) for one thing: the (work, host) pairs the
layer has a group of. Asked to (``GROUPS_ENV`` names a file), the build leaves them there, and the
task takes them once. This module imports nothing heavy: the task holds it while the build runs
(pipelines.site.consistency, which reads the pairs, pulls in the fact layer: ~180 MiB held beside
the build for nothing).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

GROUPS_ENV = "ALMANAC_SITE_GROUPS"


def write_groups(pairs: set[tuple[str, str]]) -> None:
    """Leave the fact layer's (work, host) ``pairs`` where GROUPS_ENV says (atomic; nothing when it is
    unset, and a file that cannot be written costs only the check's time)."""
    where = os.environ.get(GROUPS_ENV)
    if not where:
        return
    path = Path(where)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(sorted(pairs)), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def take_groups(path: Path) -> set[tuple[str, str]] | None:
    """The pairs a build left at ``path`` (the file removed), or None when there are none or they cannot
    be read (the caller figures them from the set)."""
    try:
        pairs = json.loads(Path(path).read_text(encoding="utf-8"))
        return {(str(w), str(h)) for w, h in pairs}
    except (OSError, ValueError, TypeError):
        return None
    finally:
        Path(path).unlink(missing_ok=True)
