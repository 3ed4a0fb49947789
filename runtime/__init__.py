"""Inference Almanac runtime: measure LLM inference on a host and write canonical artifacts.

Stages: run (runtime.backends, runtime.worker) -> store (runtime.artifacts) -> analyse
(pipelines) -> render (pipelines.site). Modules in this package that pipelines may import
are free of backend imports: artifacts, metrics, stats, errors, paths.
"""

__version__ = "0.1.0"
