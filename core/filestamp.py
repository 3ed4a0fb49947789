"""What says a file is unchanged since it was last read, without reading it (as git's index does).

A file's stamp is its size, modification and change times, inode and device: a cache may reuse what
it made from the file while the stamp is the same. A file changed within the last seconds could
change again within its timestamps' tick without its stamp changing (git's "racy" case), so it is
``settled`` (safe to remember) only after ``RACY_NS``.
"""

from __future__ import annotations

import os
import time

RACY_NS = 2_000_000_000
#: the clock ``settled`` reads (a test moves it forward instead of ageing files)
now_ns = time.time_ns


def stamp(st: os.stat_result) -> str:
    """The file's stamp from its ``stat``."""
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"


def settled(st: os.stat_result) -> bool:
    """Whether what was made from the file may be remembered under its stamp (it last changed more
    than ``RACY_NS`` ago)."""
    return now_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS
