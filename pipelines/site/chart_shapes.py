"""A chart's shape made by Altair once, its rows bound per chart.

Building an Altair chart and converting it to a dict costs milliseconds a chart (layer merging,
deep copies of the schema objects, a hash of every subchart), and a fleet's pages draw thousands
of charts that differ only in their rows. A builder decorated with ``shape`` is split in two:

- the shape: the decorated function builds the Altair chart from its data arguments and its shape
  parameters (titles, fields, scales, sizes, layer structure: anything hashable). Called with
  placeholders (``alt.NamedData`` named ``almanac-rows-<i>``) for its data, it is converted by
  Altair's own ``to_dict`` once per distinct shape and kept (``functools.lru_cache``, keyed on every
  shape argument, the active Altair theme and whether charts are validated: nothing else reaches
  the dict, so a kept shape is never stale);
- the rows: each call binds its frames the way Altair's ``to_dict`` would, through Altair's own
  ``_prepare_data`` (its data transformer: the row limit, ``sanitize_pandas_dataframe``, records;
  the dataset named by the hash of its values, moved to the top-level ``datasets``), into a copy of
  the kept dict.

The result is the dict Altair's ``to_dict`` gives for the same chart built on the frames themselves
(``Shape.chart``): tests/test_chart_shapes.py compares the two for every builder. A shape must give
every encoding field an explicit type (``"mean:Q"``): with a placeholder Altair cannot infer one,
and says so when the shape is made.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import altair as alt
import pandas as pd
from altair.vegalite.v6 import api as _altair_api

SLOT = "almanac-rows-"
SHAPES_KEPT = (
    1024  # distinct shapes kept per process (a fleet build makes a few hundred)
)


def _validate() -> bool:
    """Whether Altair validates the spec (the tests do; the site build skips it, see charts.embed)."""
    return bool(os.environ.get("ALMANAC_VALIDATE_CHARTS"))


def _bind(node: Any, names: dict[int, str]) -> Any:
    """A copy of ``node`` with every placeholder ``data`` replaced by its dataset's name."""
    if isinstance(node, dict):
        j = _slot(node)
        return {
            k: {"name": names[j]} if j is not None and k == "data" else _bind(v, names)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_bind(v, names) for v in node]
    return node


def _pattern(frames: Sequence[pd.DataFrame | None]) -> tuple[int, ...]:
    """Each frame's slot: -1 for None, else the first position holding the same object (Altair
    lifts a layer's data by identity, so one frame given twice is one slot)."""
    return tuple(
        -1 if f is None else next(j for j, g in enumerate(frames) if g is f)
        for f in frames
    )


def _dataset(frame: Any, context: dict[str, Any]) -> str:
    """Altair's own step for a chart's data frame: its rows through the data transformer, moved to
    ``context["datasets"]`` under the name of their hash; that name."""
    named = _altair_api._prepare_data(frame, context)
    if not isinstance(named, alt.NamedData) or not isinstance(named.name, str):
        raise TypeError(
            f"chart data {type(frame).__name__} did not become a named dataset"
        )
    return named.name


def _slot(node: Any) -> int | None:
    """The slot a chart node's ``data`` holds, or None."""
    data = node.get("data")
    if isinstance(data, dict) and len(data) == 1:
        name = data.get("name")
        if isinstance(name, str) and name.startswith(SLOT):
            return int(name[len(SLOT) :])
    return None


def _slot_order(node: Any, out: list[int]) -> list[int]:
    """The slots in the order Altair's to_dict prepares their data: a chart's own data before its
    parts, the parts in the spec's order. (Altair names the datasets in this order.)"""
    if isinstance(node, dict):
        j = _slot(node)
        if j is not None and j not in out:
            out.append(j)
        for v in node.values():
            _slot_order(v, out)
    elif isinstance(node, list):
        for v in node:
            _slot_order(v, out)
    return out


class Shape:
    """A chart builder ``build(*frames, *shape_args, **shape_kw) -> alt chart`` whose shape is made
    once; ``shape(frames, ...)`` is the chart's Vega-Lite dict."""

    def __init__(self, build: Callable[..., alt.TopLevelMixin]) -> None:
        self.build = build
        self._made = functools.lru_cache(maxsize=SHAPES_KEPT)(self._make)
        functools.update_wrapper(self, build)

    def chart(
        self, frames: Sequence[pd.DataFrame | None], *args: Any, **kw: Any
    ) -> alt.TopLevelMixin:
        """The plain Altair chart on the frames themselves (what the kept shape stands for)."""
        return self.build(*frames, *args, **kw)

    def _make(
        self,
        frames: tuple[int, ...],
        args: tuple[Any, ...],
        kw: tuple[tuple[str, Any], ...],
        validate: bool,
        theme: str,
    ) -> tuple[dict[str, Any], tuple[int, ...]]:
        """The shape's dict with placeholders, and its slots in the order Altair prepares them."""
        made: dict[int, alt.NamedData] = {}
        slots = [
            None if j < 0 else made.setdefault(j, alt.NamedData(name=f"{SLOT}{j}"))
            for j in frames
        ]
        spec: dict[str, Any] = self.build(*slots, *args, **dict(kw)).to_dict(
            validate=validate
        )
        return spec, tuple(_slot_order(spec, []))

    def __call__(
        self, frames: Sequence[pd.DataFrame | None], *args: Any, **kw: Any
    ) -> dict[str, Any]:
        made, order = self._made(
            _pattern(frames),
            args,
            tuple(sorted(kw.items())),
            _validate(),
            alt.theme.active,
        )
        context: dict[str, Any] = {}
        names = {j: _dataset(frames[j], context) for j in order}
        spec: dict[str, Any] = _bind(made, names)
        # as Altair's to_dict: the datasets last, in the order it prepares them (a shape's own
        # inline rows would come first: give constant rows as a frame to keep Altair's order)
        if context.get("datasets"):
            spec.setdefault("datasets", {}).update(context["datasets"])
        return spec

    def cache_info(self) -> Any:
        """How often a shape was reused (functools' counters)."""
        return self._made.cache_info()


def shape(build: Callable[..., alt.TopLevelMixin]) -> Shape:
    """Decorator: ``build``'s first arguments are its data (one per frame passed; a frame may be None,
    a chart part the shape leaves out), the rest its shape parameters, which must be hashable (a
    list as a tuple)."""
    return Shape(build)
