"""How busy the rest of the machine was while a timing test measured (the timing lane, marker ``timing``).

A real A/B's verdict depends on the machine as well as the code: on a 2-core machine shared with other
work, the ordinary build's two threads get what the other processes leave, and llama.cpp's threads wait
for each other at every barrier, so the halved build (one thread) can come out equal or even ahead.
``others_busy()`` measures that load: the CPU time the whole machine spent busy (steal included) less
what this process and its children used, as a share of the wall time times the logical cores.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

#: Other processes using more than this share of the machine's CPU while a timing test measured: a loaded
#: machine, whose verdicts are reported, not asserted.
QUIET = 0.10
_BUSY = (
    "user",
    "nice",
    "system",
    "irq",
    "softirq",
    "steal",
)  # guest time is counted in user already


@dataclass
class Load:
    others: float = (
        0.0  # share of the machine's CPU time the other processes used (0 to 1)
    )
    wall_s: float = 0.0
    cores: int = 1

    @property
    def quiet(self) -> bool:
        return self.others <= QUIET

    def __str__(self) -> str:
        return f"other processes used {100 * self.others:.0f}% of the {self.cores} cores over {self.wall_s:.0f} s"


def _busy_s() -> float:
    t = psutil.cpu_times()
    return sum(getattr(t, f, 0.0) for f in _BUSY)


def _own_s() -> float:
    return sum(
        r.ru_utime + r.ru_stime
        for r in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    )


@contextmanager
def others_busy() -> Iterator[Load]:
    """A Load, filled in when the block ends, however it ends (children count as this process's once
    waited for)."""
    load = Load(cores=psutil.cpu_count() or 1)
    busy0, own0, t0 = _busy_s(), _own_s(), time.monotonic()
    try:
        yield load
    finally:
        load.wall_s = time.monotonic() - t0
        others = (_busy_s() - busy0) - (_own_s() - own0)
        load.others = max(0.0, others) / max(load.wall_s * load.cores, 1e-9)
