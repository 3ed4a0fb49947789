"""Static assets generated at build time."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script (exposes window.vegaEmbed), for offline charts.

    vl-convert takes ~4 s to bundle them; the result depends only on its version, so it is kept
    in the user cache (ALMANAC_CACHE) by that version."""
    import vl_convert

    from core.artifacts import atomic_write_text
    from core.errors import StorageError
    from core.paths import cache_dir

    # vl-convert's stub (vl_convert.pyi) lacks __version__ and marks javascript_bundle's optional
    # snippet as required: both are the library's, not ours.
    version = vl_convert.__version__  # type: ignore[attr-defined]
    path = cache_dir() / "vega-bundle" / f"vl-convert-{version}.js"
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError, UnicodeDecodeError):
        pass
    text = vl_convert.javascript_bundle()  # type: ignore[call-arg]
    try:
        atomic_write_text(path, text)
    except (OSError, StorageError):  # a read-only or full cache only costs time
        pass
    return text
