"""Reservoir sampling: a uniform sample of at most ``k`` items from a stream of unknown length.

Algorithm R (Vitter 1985, after Waterman): the first ``k`` items fill the reservoir; item ``i``
(0-based, ``i >= k``) replaces a random slot with probability ``k / (i + 1)``. Every item ends in
the sample with probability ``k / n``, whatever ``n`` turns out to be, in one pass and O(k) memory.
Seeded through ``random.Random(seed)``, so the same stream and seed keep the same items (GuideLLM
bounds its stored requests the same way: ``sample_requests``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")

METHOD = "reservoir sampling (Algorithm R), random.Random(seed)"


def sample_indices(n: int, k: int, seed: int) -> list[int]:
    """The positions Algorithm R keeps from a stream of ``n`` items, ascending (all when ``k >= n``)."""
    return sample(range(n), k, seed)


def sample(items: Iterable[T], k: int, seed: int) -> list[T]:
    """At most ``k`` of ``items``, each kept with probability k/n, in their original order."""
    if k < 0:
        raise ValueError(f"k must be >= 0 (got {k})")
    rng = random.Random(seed)
    slots: list[tuple[int, T]] = []
    for i, x in enumerate(items):
        if i < k:
            slots.append((i, x))
            continue
        j = rng.randrange(i + 1)
        if j < k:
            slots[j] = (i, x)
    return [x for _, x in sorted(slots, key=lambda p: p[0])]
