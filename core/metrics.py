"""Metrics, declared once with their meaning.

Ranking, sorting, table headers, chart axes and the Methodology page all read these
declarations instead of scattered literals (the lm-evaluation-harness ``register_metric``
way).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.registry import Registry


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    higher_is_better: bool
    aggregation: str  # how samples become the headline figure
    description: str
    decimals: int = 2
    #: a run's headline figure: the one line that reports a finished run (`invoke bench`'s progress)
    #: shows it, in this registry's order
    headline: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def display_scale(self) -> float:
        """What a stored value is multiplied by to be shown in ``unit``: a share is stored as a
        fraction (0.83) and shown in % (83)."""
        return 100.0 if self.unit == "%" else 1.0

    def better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b


METRICS: Registry[Metric] = Registry("metric")


def register_metric(metric: Metric) -> Metric:
    return METRICS.add(metric.name, metric, stacklevel=2)


def shown(name: str) -> Metric:
    """The metric to show a value of ``name`` with: the registered one, or, for a name no metric here
    declares (an artifact written elsewhere, by a newer almanac), a stand-in that shows the value
    under its own name, without a unit, at 2 decimals. For display only: never rank or compare by it."""
    m = METRICS.get(name) if isinstance(name, str) else None
    if m is not None:
        return m
    return Metric(
        str(name),
        str(name),
        "",
        True,
        "unknown metric",
        "A metric this almanac does not declare.",
        2,
    )


def get(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(
            f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}"
        ) from None


register_metric(
    Metric(
        "tokens_per_second",
        "Rate",
        "t/s",
        True,
        "mean of per-repetition rates",
        "Tokens processed per second in one repetition (n_prompt + n_gen tokens / the repetition's "
        "wall time), as llama-bench's avg_ts: the mean over repetitions of each repetition's rate, "
        "not total tokens over total time.",
        2,
        headline=True,
    )
)
register_metric(
    Metric(
        "load_time_s",
        "Load time",
        "s",
        False,
        "single sample",
        "Model load and context creation in a fresh child process, from the start of the load call to "
        "a ready context (file read, tensor upload/repack).",
        3,
    )
)
register_metric(
    Metric(
        "ttft_ms",
        "TTFT",
        "ms",
        False,
        "mean over requests",
        "Time to first token: request start to the first streamed chunk that carries content "
        "(prompt templating, tokenisation, prefill and the first sample included).",
        1,
        headline=True,
    )
)
register_metric(
    Metric(
        "tpot_ms",
        "TPOT",
        "ms",
        False,
        "mean over requests",
        "Time per output token after the first: (E2E latency - TTFT) / (output tokens - 1).",
        2,
        headline=True,
    )
)
register_metric(
    Metric(
        "e2e_ms",
        "E2E latency",
        "ms",
        False,
        "mean over requests",
        "End-to-end latency: request start to the last chunk of the response.",
        1,
    )
)
register_metric(
    Metric(
        "output_tokens",
        "Output tokens",
        "tokens",
        True,
        "mean over requests",
        "Tokens generated per request, counted by the sampler (one per sampling step), not by "
        "re-tokenising the text.",
        1,
    )
)
register_metric(
    Metric(
        "decode_tps",
        "Decode rate",
        "t/s",
        True,
        "mean over requests",
        "Per-request generation rate after the first token: 1000 / TPOT.",
        2,
    )
)
register_metric(
    Metric(
        "itl_ms",
        "Inter-token latency",
        "ms",
        False,
        "percentiles over all gaps",
        "Gap between consecutive sampled tokens within a request (all requests pooled); the "
        "table shows p50, p95 and p99.",
        2,
    )
)
register_metric(
    Metric(
        "peak_rss_bytes",
        "Peak RSS",
        "bytes",
        False,
        "single sample",
        "Peak resident set size of the child process that ran the configuration (its own VmHWM, "
        "read at its end; getrusage ru_maxrss when the child could not report it), model weights "
        "mapped and touched included.",
        0,
    )
)
register_metric(
    Metric(
        "peak_vram_bytes",
        "Peak VRAM",
        "bytes",
        False,
        "single sample",
        "Peak GPU memory used by the child process (NVML), where there is a GPU.",
        0,
    )
)

# -- Serving (OpenAI-compatible HTTP backend: serve and concurrency tests) -------------------
register_metric(
    Metric(
        "startup_ms",
        "Startup → healthy",
        "ms",
        False,
        "mean over server starts",
        "From starting the server process to its first 200 answer on the health path (model load "
        "included); one sample per cold start.",
        1,
        headline=True,
    )
)
register_metric(
    Metric(
        "cold_ttft_ms",
        "Cold TTFT",
        "ms",
        False,
        "mean over server starts",
        "TTFT of the first request a freshly started (and just healthy) server answers.",
        1,
    )
)
register_metric(
    Metric(
        "cold_e2e_ms",
        "Cold full request",
        "ms",
        False,
        "mean over server starts",
        "E2E latency of the first request a freshly started server answers.",
        1,
    )
)
register_metric(
    Metric(
        "cold_total_ms",
        "Cold total first response",
        "ms",
        False,
        "mean over server starts",
        "Startup → healthy plus the cold full request: how long a user waits for the first answer "
        "from a server that was not running.",
        1,
    )
)
register_metric(
    Metric(
        "peak_aggregate_tps",
        "Peak aggregate output rate",
        "t/s",
        True,
        "highest level",
        "Output tokens of all successful requests of a concurrency level / the level's wall time "
        "(first request sent to last response finished); the highest over the sweep's levels.",
        2,
        headline=True,
    )
)
register_metric(
    Metric(
        "slo_max_concurrency",
        "Highest concurrency meeting the SLOs",
        "clients",
        True,
        "single sample",
        "The highest concurrency level L such that at every level up to L at least the target share "
        "(slo_attainment) of requests succeeded within the TTFT and TPOT limits; 0 if none did.",
        0,
        headline=True,
    )
)
register_metric(
    Metric(
        "slo_max_level",
        "Highest level meeting the SLOs",
        "level",
        True,
        "single sample",
        "Load tests (kind load): the highest level (users, or requests per second) whose latency "
        "percentiles met every SLO at the stated confidence (order-statistic bounds), with every level "
        "below it meeting too; 0 if none did.",
        2,
    )
)
register_metric(
    Metric(
        "capacity",
        "Capacity at SLO",
        "level",
        True,
        "single sample",
        "Capacity search (kind capacity): the highest level (users, or requests per second) whose "
        "latency percentiles meet the SLOs; its interval is capacity_low to capacity_high.",
        2,
        headline=True,
    )
)
register_metric(
    Metric(
        "capacity_low",
        "Capacity, lower bound",
        "level",
        True,
        "single sample",
        "The highest level confirmed to meet the SLOs at the stated confidence.",
        2,
    )
)
register_metric(
    Metric(
        "capacity_high",
        "Capacity, upper bound",
        "level",
        True,
        "single sample",
        "The highest level not confirmed to miss the SLOs (the level below the lowest confirmed miss).",
        2,
    )
)
register_metric(
    Metric(
        "requests_sent",
        "Requests sent",
        "requests",
        False,
        "count",
        "Timed requests a load test or capacity search sent in all (warm-up excluded): what its answer cost.",
        0,
        headline=True,
    )
)
register_metric(
    Metric(
        "probe_success_rate",
        "Probe success rate",
        "%",
        True,
        "successful tries / tries",
        "Endpoint probe: share of the tries of each case that succeeded (one sample per case).",
        1,
        headline=True,
    )
)
register_metric(
    Metric(
        "failed_requests",
        "Failed requests",
        "requests",
        False,
        "count",
        "Requests that ended in an error (timeout, HTTP error, dropped connection, server lost), each "
        "with its reason in the artifact's samples.",
        0,
    )
)


# -- Agent loops under injected tool faults (agent_loop tests; per profile on the Agent loops page) --
register_metric(
    Metric(
        "agent_success",
        "Agent success rate",
        "%",
        True,
        "share of episodes",
        "Agent loops: share of episodes whose final answer equals the task's expected value (one sample per "
        "episode, 1 or 0); the page gives it per fault profile and placement with the Wilson CI95.",
        3,
    )
)
register_metric(
    Metric(
        "agent_steps",
        "Steps to convergence",
        "steps",
        False,
        "mean over successful episodes",
        "Agent loops: model turns a successful episode took to its answer (a perfect agent: tool calls + 1).",
        2,
    )
)
register_metric(
    Metric(
        "agent_loop_ms",
        "Episode latency",
        "ms",
        False,
        "mean over episodes",
        "Agent loops: one episode from its first model request to its end (model turns, tool calls with "
        "retries and timeouts, controller work).",
        1,
    )
)
register_metric(
    Metric(
        "agent_tool_ms",
        "Tool call latency",
        "ms",
        False,
        "mean over tool call attempts",
        "Agent loops: one tool call attempt as the controller saw it (an in-process call, or the HTTP round "
        "trip to the tool service), ended at the profile's timeout.",
        3,
    )
)
register_metric(
    Metric(
        "agent_retries",
        "Tool retries",
        "retries",
        False,
        "mean over episodes",
        "Agent loops: tool call attempts beyond the first per tool action, summed over an episode.",
        2,
    )
)


# -- Optimization tracks (generate tests: speculative decoding, MoE expert reduction) --------
register_metric(
    Metric(
        "generation_tps",
        "Generation rate",
        "t/s",
        True,
        "mean of per-repetition rates",
        "Greedy generation after the first token: sampled steps after the first / the time from the "
        "first sampled token to the last, summed over the workload's prompts in one repetition "
        "(prompt processing excluded, as llama-server's predicted_per_second); the mean over "
        "repetitions.",
        2,
        headline=True,
    )
)
register_metric(
    Metric(
        "draft_acceptance",
        "Draft acceptance",
        "%",
        True,
        "mean of per-repetition rates",
        "Speculative decoding: drafted tokens the target accepted / drafted tokens it verified "
        "(llama.cpp's n_accept / n_draft), over the workload's prompts in one repetition.",
        1,
        headline=True,
    )
)
register_metric(
    Metric(
        "pass_rate",
        "Pass rate",
        "%",
        True,
        "passed items / scored items",
        "Quality runs: share of a suite's sampled items whose output the item's scorer accepted "
        "(every score is pass or fail); the interval is the 95% Wilson score interval of that share.",
        1,
    )
)

# -- Energy (rate tests; runtime/hosts/energy.py) ------------------------------------------------
register_metric(
    Metric(
        "prefill_j_per_token",
        "Prefill energy",
        "J/token",
        False,
        "mean over metered regions",
        "Energy per prompt token of a pp test: the device's energy counter (NVML's total energy of the "
        "GPUs on a GPU run, RAPL's CPU package energy on a CPU run) read immediately before and after each "
        "timed repetition, over its tokens; where repetitions last under a second, regions of k back-to-back "
        "repetitions lasting a second or more are metered instead (the counters advance in steps). The whole "
        "device's energy, idle power included.",
        4,
    )
)
register_metric(
    Metric(
        "decode_j_per_token",
        "Decode energy",
        "J/token",
        False,
        "mean over metered regions",
        "Energy per generated token of a tg test, read as for the prefill energy: the device's energy over a "
        "timed repetition (or a region of repetitions lasting a second or more) divided by its tokens.",
        4,
    )
)
ENERGY_METRICS = ("prefill_j_per_token", "decode_j_per_token")

register_metric(
    Metric(
        "embeddings_per_second",
        "Embeddings",
        "emb/s",
        True,
        "mean of per-repetition rates",
        "Passages embedded per second in one repetition (every passage of the corpus / the "
        "repetition's wall time, llama.cpp embedding mode, mean pooling): the mean over repetitions.",
        1,
    )
)
register_metric(
    Metric(
        "index_build_ms",
        "Index build",
        "ms",
        False,
        "mean over repetitions",
        "Time to build the retrieval index from the corpus's embeddings (an exact index: the "
        "vectors L2-normalised into one float32 matrix).",
        2,
    )
)
register_metric(
    Metric(
        "index_bytes",
        "Index size",
        "bytes",
        False,
        "single sample",
        "Size of the retrieval index built from the corpus's embeddings (passages x dimension x 4 "
        "bytes for an exact float32 index).",
        0,
    )
)

register_metric(
    Metric(
        "batching_speedup",
        "Batching speed-up",
        "×",
        True,
        "mean over rounds",
        "Wall time of a tokenize workload sent one text a request over its wall time sent in batches "
        "(a list of texts a request), per round of both arms.",
        2,
    )
)
register_metric(
    Metric(
        "tokenize_one_by_one_s",
        "Tokenize, one by one",
        "s",
        False,
        "mean over rounds",
        "Wall time of the tokenize workload sent one text a request.",
        3,
    )
)
register_metric(
    Metric(
        "tokenize_batched_s",
        "Tokenize, batched",
        "s",
        False,
        "mean over rounds",
        "Wall time of the tokenize workload sent in batches (a list of texts a request).",
        3,
    )
)
