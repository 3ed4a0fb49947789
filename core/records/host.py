"""The host artifact: what the reading stages know of a host's fingerprint."""

from __future__ import annotations

from typing import Any


def _size_bytes(text: str | None) -> int | None:
    """'480 MiB', '32768K', '4M' (sysfs, lscpu) in bytes."""
    import re

    m = re.match(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([KMG]?)(?:i?B)?\s*$", str(text or ""), re.I)
    if not m:
        return None
    return int(float(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()])


def llc_bytes(fp: dict[str, Any]) -> int | None:
    """Size of the host's last-level cache from its fingerprint (the highest cache level listed)."""
    caches = (fp.get("cpu") or {}).get("cache") or {}
    levels = [(k, _size_bytes(v)) for k, v in caches.items() if k[:2] in ("L2", "L3", "L4") and not k.endswith("i")]
    levels = [(k, v) for k, v in levels if v]
    return max(levels)[1] if levels else None
