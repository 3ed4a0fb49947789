"""Metrics, declared once with their meaning.

Ranking, sorting, table headers, chart axes and the Methodology page all read these
declarations instead of scattered literals (the lm-evaluation-harness ``register_metric``
way).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    higher_is_better: bool
    aggregation: str  # how samples become the headline figure
    description: str
    test_kinds: tuple[str, ...] = ()
    decimals: int = 2

    def to_dict(self) -> dict:
        d = asdict(self)
        d["test_kinds"] = list(self.test_kinds)
        return d

    def better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b


METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} registered twice")
    METRICS[metric.name] = metric
    return metric


def get(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}") from None


register_metric(Metric(
    "tokens_per_second", "Rate", "t/s", True, "mean of per-repetition rates",
    "Tokens processed per second in one repetition (n_prompt + n_gen tokens / the repetition's "
    "wall time), as llama-bench's avg_ts: the mean over repetitions of each repetition's rate, "
    "not total tokens over total time.",
    ("rate",), 2))
register_metric(Metric(
    "load_time_s", "Load time", "s", False, "single sample",
    "Model load and context creation in a fresh child process, from the start of the load call to "
    "a ready context (file read, tensor upload/repack).",
    ("rate", "chat"), 3))
register_metric(Metric(
    "ttft_ms", "TTFT", "ms", False, "mean over requests",
    "Time to first token: request start to the first streamed chunk that carries content "
    "(prompt templating, tokenisation, prefill and the first sample included).",
    ("chat",), 1))
register_metric(Metric(
    "tpot_ms", "TPOT", "ms", False, "mean over requests",
    "Time per output token after the first: (E2E latency - TTFT) / (output tokens - 1).",
    ("chat",), 2))
register_metric(Metric(
    "e2e_ms", "E2E latency", "ms", False, "mean over requests",
    "End-to-end latency: request start to the last chunk of the response.",
    ("chat",), 1))
register_metric(Metric(
    "output_tokens", "Output tokens", "tokens", True, "mean over requests",
    "Tokens generated per request, counted by the sampler (one per sampling step), not by "
    "re-tokenising the text.",
    ("chat",), 1))
register_metric(Metric(
    "decode_tps", "Decode rate", "t/s", True, "mean over requests",
    "Per-request generation rate after the first token: 1000 / TPOT.",
    ("chat",), 2))
register_metric(Metric(
    "itl_ms", "Inter-token latency", "ms", False, "percentiles over all gaps",
    "Gap between consecutive sampled tokens within a request (all requests pooled); the "
    "table shows p50, p95 and p99.",
    ("chat",), 2))
register_metric(Metric(
    "peak_rss_bytes", "Peak RSS", "bytes", False, "single sample",
    "Peak resident set size of the child process that ran the configuration (getrusage "
    "ru_maxrss after it exits), model weights mapped and touched included.",
    ("rate", "chat"), 0))
register_metric(Metric(
    "peak_vram_bytes", "Peak VRAM", "bytes", False, "single sample",
    "Peak GPU memory used by the child process (NVML), where there is a GPU.",
    ("rate", "chat"), 0))
