"""What says a file is unchanged since it was last read, without reading it (as git's index does).

A file's stamp is its size, modification time, inode and device: a cache may reuse what it made from
the file while the stamp is the same. A file changed within the last seconds could change again
within its timestamps' tick without its stamp changing (git's "racy" case), so it is ``settled``
(safe to remember) only after ``RACY_NS``.

The change time (ctime) is not in the stamp, as git's ``core.trustctime=false`` leaves it out (and as
pipelines.index trusts size and mtime). The build publishes every artifact by hard-linking it into
the site (pipelines.site.hooks ``_mirror``), and removing the last site unlinks them again: both
change each file's ctime, so a stamp with ctime named every artifact changed at every build and
every one was read and hashed again (a twentieth of a warm build at 10,000 artifacts).

What ctime alone would have caught: a file rewritten *in place* (same inode) to the same size whose
mtime was then set back (``os.utime``, ``touch -r``). That edit is not seen here; delete the cache
(``ALMANAC_CACHE``) after one. Every writer of artifacts writes by rename (core.artifacts
``atomic_write_bytes``: a temporary file created while the old one still exists, so another inode),
and an editor or ``cp`` that writes in place sets mtime to now: both change the stamp.
"""

from __future__ import annotations

import os
import time

RACY_NS = 2_000_000_000
#: the clock ``settled`` reads (a test moves it forward instead of ageing files)
now_ns = time.time_ns


def stamp(st: os.stat_result) -> str:
    """The file's stamp from its ``stat``: size, mtime, inode, device (not ctime: see above)."""
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_dev}"


def settled(st: os.stat_result) -> bool:
    """Whether what was made from the file may be remembered under its stamp (its content last changed
    more than ``RACY_NS`` ago: mtime, the time in the stamp; a link made since changes only ctime)."""
    return now_ns() - st.st_mtime_ns > RACY_NS
