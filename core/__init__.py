"""Inference Almanac core: what every stage shares, and nothing else.

Artifacts and their typed records, test kinds, metrics, statistics, precision, errors, paths,
YAML loading and the degeneration detector. ``runtime`` (measure) and ``pipelines`` (analyse,
render) import this package and never each other; it imports neither (import-linter contracts
in pyproject.toml, run by ``invoke test``).
"""

__version__ = "0.2.0"  # 0.2.0: the quiet-machine policy (core.quiet), stats method 2
