"""Inference Almanac runtime: measure LLM inference on a host and write canonical artifacts.

Stages: run (this package) -> store (core.artifacts, core.records) -> analyse (pipelines) ->
render (pipelines.site). This package imports core and never pipelines.

* ``backends``: one package per way of running a model, behind ``backends.base.Backend``;
* ``execution``: matrices, the runner, the child-process worker, preflight and the run lock;
* ``models``: the model registry, synthetic and derived model files;
* ``hosts``: the host fingerprint, the SSH inventory, bandwidth probes and GPUs;
* ``quality``: suites, scorers, the sandbox and quality/perplexity runs;
* ``remote``: the same matrices on inventory hosts over SSH; ``importers``: llama-bench JSON.
"""

from core import __version__  # noqa: F401 - the almanac's version, recorded in every artifact
