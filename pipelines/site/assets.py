"""Static assets generated at build time."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script (exposes window.vegaEmbed), for offline charts."""
    import vl_convert

    return vl_convert.javascript_bundle()
