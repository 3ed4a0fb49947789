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
    "Peak resident set size of the child process that ran the configuration (its own VmHWM, "
    "read at its end; getrusage ru_maxrss when the child could not report it), model weights "
    "mapped and touched included.",
    ("rate", "chat"), 0))
register_metric(Metric(
    "peak_vram_bytes", "Peak VRAM", "bytes", False, "single sample",
    "Peak GPU memory used by the child process (NVML), where there is a GPU.",
    ("rate", "chat"), 0))

# -- Serving (OpenAI-compatible HTTP backend: serve and concurrency tests) -------------------
register_metric(Metric(
    "startup_ms", "Startup → healthy", "ms", False, "mean over server starts",
    "From starting the server process to its first 200 answer on the health path (model load "
    "included); one sample per cold start.",
    ("serve", "chat", "concurrency"), 1))
register_metric(Metric(
    "cold_ttft_ms", "Cold TTFT", "ms", False, "mean over server starts",
    "TTFT of the first request a freshly started (and just healthy) server answers.",
    ("serve",), 1))
register_metric(Metric(
    "cold_e2e_ms", "Cold full request", "ms", False, "mean over server starts",
    "E2E latency of the first request a freshly started server answers.",
    ("serve",), 1))
register_metric(Metric(
    "cold_total_ms", "Cold total first response", "ms", False, "mean over server starts",
    "Startup → healthy plus the cold full request: how long a user waits for the first answer "
    "from a server that was not running.",
    ("serve",), 1))
register_metric(Metric(
    "peak_aggregate_tps", "Peak aggregate output rate", "t/s", True, "highest level",
    "Output tokens of all successful requests of a concurrency level / the level's wall time "
    "(first request sent to last response finished); the highest over the sweep's levels.",
    ("concurrency",), 2))
register_metric(Metric(
    "slo_max_concurrency", "Highest concurrency meeting the SLOs", "clients", True, "single sample",
    "The highest concurrency level L such that at every level up to L at least the target share "
    "(slo_attainment) of requests succeeded within the TTFT and TPOT limits; 0 if none did.",
    ("concurrency",), 0))
register_metric(Metric(
    "failed_requests", "Failed requests", "requests", False, "count",
    "Requests that ended in an error (timeout, HTTP error, dropped connection, server lost), each "
    "with its reason in the artifact's samples.",
    ("serve", "chat", "concurrency"), 0))


def _also_measured_by(kind: str, names: tuple[str, ...]) -> None:
    """Declare that an existing metric is measured by another test kind too."""
    from dataclasses import replace

    for name in names:
        if name in METRICS and kind not in METRICS[name].test_kinds:
            METRICS[name] = replace(METRICS[name], test_kinds=METRICS[name].test_kinds + (kind,))


_also_measured_by("serve", ("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens", "decode_tps", "itl_ms"))

# -- Optimization tracks (generate tests: speculative decoding, MoE expert reduction) --------
register_metric(Metric(
    "generation_tps", "Generation rate", "t/s", True, "mean of per-repetition rates",
    "Greedy generation after the first token: sampled steps after the first / the time from the "
    "first sampled token to the last, summed over the workload's prompts in one repetition "
    "(prompt processing excluded, as llama-server's predicted_per_second); the mean over "
    "repetitions.",
    ("generate",), 2))
register_metric(Metric(
    "draft_acceptance", "Draft acceptance", "%", True, "mean of per-repetition rates",
    "Speculative decoding: drafted tokens the target accepted / drafted tokens it verified "
    "(llama.cpp's n_accept / n_draft), over the workload's prompts in one repetition.",
    ("generate",), 1))
_also_measured_by("generate", ("ttft_ms", "e2e_ms", "output_tokens"))
register_metric(Metric(
    "pass_rate", "Pass rate", "%", True, "passed items / scored items",
    "Quality runs: share of a suite's sampled items whose output the item's scorer accepted "
    "(every score is pass or fail); the interval is the 95% Wilson score interval of that share.",
    ("quality",), 1))


# -- Headline metric per test kind: declared once; leaderboards, comparisons, history, the
# optimization tracks and the runs index rank and compare on it.
HEADLINE_BY_KIND: dict[str, str] = {
    "rate": "tokens_per_second",
    "chat": "ttft_ms",
    "generate": "generation_tps",
    "serve": "cold_total_ms",
    "concurrency": "peak_aggregate_tps",
    "quality": "pass_rate",
}


def headline(kind: str) -> Metric | None:
    """The metric a test kind is ranked and compared on, or None for a kind without one."""
    name = HEADLINE_BY_KIND.get(kind)
    return METRICS[name] if name else None

# Metrics shown beside the headline, per test kind.
COLUMNS_BY_KIND: dict[str, list[str]] = {
    "rate": ["tokens_per_second"],
    "chat": ["ttft_ms", "tpot_ms", "e2e_ms", "output_tokens"],
    "generate": ["generation_tps", "ttft_ms", "draft_acceptance"],
}
