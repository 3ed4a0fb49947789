"""What a load test sends and what it must meet: request-length distributions, synthetic and
shared-prefix workloads, and percentile SLOs. Specs only (pydantic, parsed from matrix YAML);
``runtime.load.workload`` turns a spec into request bodies, the kinds ``load`` and ``capacity``
(``core/kinds/load.py``, ``core/kinds/capacity.py``) embed them.

A length distribution draws integers with a seeded generator (numpy's PCG64), clipped to
``[min, max]``: the same spec and seed give the same lengths on every host.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.kinds.base import Message


class Lengths(BaseModel):
    """A distribution of token counts: ``fixed`` (value), ``uniform`` (min..max), ``normal`` (mean,
    stddev, clipped to min..max) or ``list`` (values drawn uniformly, with replacement)."""

    model_config = ConfigDict(extra="forbid")
    dist: Literal["fixed", "uniform", "normal", "list"] = Field(
        "fixed", description="fixed, uniform, normal or list."
    )
    value: int | None = Field(None, ge=1, description="fixed: the count.")
    min: int | None = Field(
        None, ge=1, description="uniform: lowest count; normal: clip below (default 1)."
    )
    max: int | None = Field(
        None,
        ge=1,
        description="uniform: highest count; normal: clip above (default mean + 4 stddev).",
    )
    mean: float | None = Field(None, gt=0, description="normal: mean count.")
    stddev: float | None = Field(None, ge=0, description="normal: standard deviation.")
    values: list[int] = Field(
        default_factory=list, description="list: the counts to draw from."
    )

    @model_validator(mode="after")
    def _complete(self) -> Lengths:
        d = self.dist
        if d == "fixed" and self.value is None:
            raise ValueError("a fixed length needs value")
        if d == "uniform" and (
            self.min is None or self.max is None or self.min > self.max
        ):
            raise ValueError("a uniform length needs min <= max")
        if d == "normal" and (self.mean is None or self.stddev is None):
            raise ValueError("a normal length needs mean and stddev")
        if d == "list" and (not self.values or any(v < 1 for v in self.values)):
            raise ValueError("a list length needs values, each >= 1")
        return self

    @classmethod
    def of(cls, value: int | dict | Lengths) -> Lengths:
        """A bare integer is a fixed length."""
        if isinstance(value, Lengths):
            return value
        if isinstance(value, int):
            return cls(dist="fixed", value=value)
        return cls.model_validate(value)

    def sample(self, rng: np.random.Generator, n: int) -> list[int]:
        if self.dist == "fixed":
            return [int(self.value)] * n
        if self.dist == "uniform":
            return [int(x) for x in rng.integers(self.min, self.max + 1, size=n)]
        if self.dist == "list":
            return [
                int(self.values[i]) for i in rng.integers(0, len(self.values), size=n)
            ]
        lo = self.min or 1
        hi = self.max or max(lo, int(self.mean + 4 * self.stddev))
        return [
            int(min(hi, max(lo, round(x))))
            for x in rng.normal(self.mean, self.stddev, size=n)
        ]

    def describe(self) -> str:
        if self.dist == "fixed":
            return f"{self.value}"
        if self.dist == "uniform":
            return f"uniform {self.min}–{self.max}"
        if self.dist == "list":
            return f"one of {sorted(set(self.values))}"
        return f"normal {self.mean:g} ± {self.stddev:g}"

    def upper(self) -> int:
        """The largest count this distribution can draw."""
        if self.dist == "fixed":
            return int(self.value)
        if self.dist in ("uniform",):
            return int(self.max)
        if self.dist == "list":
            return max(self.values)
        return int(self.max or max(self.min or 1, int(self.mean + 4 * self.stddev)))


def _lengths(v):
    return Lengths.of(v) if v is not None else v


class Workload(BaseModel):
    """The requests of a load test.

    * ``synthetic``: each request a prompt of ``prompt_tokens`` tokens cut from a public text
      (``text``, data/texts/) and an answer of ``output_tokens`` (sent as max_tokens with
      ignore_eos, so the server generates exactly that many);
    * ``shared_prefix``: ``prefixes`` distinct prefixes of ``prefix_tokens`` each, and
      ``questions`` questions of ``question_tokens``; each request is one prefix followed by one
      question (a seeded draw of each): the prefix cache workload;
    * ``messages``: the same conversation every time (the ``chat`` kind's request);
    * ``trace``: the rows of a recorded trace (``trace``: a file; ``core.traces`` reads Mooncake,
      BurstGPT and our own layout), each a prompt synthesized to the row's input length and an
      answer of its output length; sent at the trace's arrival times by the ``trace`` profile;
    * ``multi_turn``: conversations of ``turns`` turns: each turn sends the whole conversation so far
      (every earlier user turn and the server's own answers) plus a new user message of
      ``prompt_tokens``, after ``think_time_s`` of the user thinking; the context grows turn by turn,
      and a server with a prefix cache can reuse all of it but the new message;
    * ``agent``: agent sessions of ``turns`` model calls (``runtime.load.agent``): the first sends a
      system prompt and a task of ``prompt_tokens`` with the tool definitions (``tools``,
      ``tool_choice``); each later turn appends the model's answer as an assistant turn carrying a
      tool call (the model's own where the server parsed one, else a scripted one, recorded per
      turn) and the tool's result of ``tool_result_tokens``, after ``think_time_s`` of the tool
      running, and asks again: the prefix grows by an answer and a tool result a turn.

    ``source`` says how prompt lengths are made: ``tokenizer`` cuts windows of token ids from the
    text with the server's own tokenizer (llama-server's /tokenize and /detokenize) so a prompt is
    the asked number of tokens before the chat template; ``text`` cuts characters at about 4 per
    token (no tokenizer needed; the server's usage.prompt_tokens says what it was); ``auto`` uses
    the tokenizer where the server exposes one. The artifact records which was used."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal[
        "synthetic", "shared_prefix", "messages", "trace", "multi_turn", "agent"
    ] = Field(
        "synthetic",
        description="synthetic, shared_prefix, messages, trace, multi_turn or agent.",
    )
    prompt_tokens: Lengths = Field(
        default_factory=lambda: Lengths(value=128),
        description="synthetic: prompt length (tokens, before the chat template).",
    )
    output_tokens: Lengths = Field(
        default_factory=lambda: Lengths(value=32),
        description="Answer length (max_tokens, with ignore_eos).",
    )
    prefixes: int = Field(
        4, ge=1, le=1000, description="shared_prefix: distinct prefixes."
    )
    prefix_tokens: Lengths = Field(
        default_factory=lambda: Lengths(value=256),
        description="shared_prefix: tokens of each prefix.",
    )
    questions: int = Field(
        16, ge=1, le=10000, description="shared_prefix: distinct questions."
    )
    question_tokens: Lengths = Field(
        default_factory=lambda: Lengths(value=24),
        description="shared_prefix: tokens of each question.",
    )
    messages: list[Message] = Field(
        default_factory=list, description="messages: the conversation sent every time."
    )
    trace: str | None = Field(
        None,
        description="trace: the trace file (JSONL or CSV; a path, relative to the data folder or absolute).",
    )
    trace_format: Literal["auto", "generic", "mooncake", "burstgpt"] = Field(
        "auto",
        description="trace: the file's layout (core.traces); auto reads it from the first row.",
    )
    max_rows: int = Field(
        2000,
        ge=1,
        le=100_000,
        description="trace: the most rows replayed (the rest is not read, and said so).",
    )
    max_context: int | None = Field(
        None,
        ge=2,
        description="trace: rows whose input + output exceed this are skipped (and counted).",
    )
    block_tokens: int = Field(
        512,
        ge=1,
        le=65536,
        description="trace: tokens of one hash_ids block (Mooncake: 512).",
    )
    turns: int = Field(
        4,
        ge=1,
        le=64,
        description="multi_turn: turns of each conversation; agent: model calls of each session.",
    )
    think_time_s: float = Field(
        0.5,
        ge=0.0,
        le=600.0,
        description="multi_turn: the user's pause between an answer and the next turn; "
        "agent: the tool's run time between a call and the next turn.",
    )
    tool_result_tokens: Lengths = Field(
        default_factory=lambda: Lengths(value=64),
        description="agent: tokens of each tool result appended to the session.",
    )
    tool_choice: Literal["auto", "required"] = Field(
        "auto",
        description="agent: the tool_choice sent with the tool definitions.",
    )
    source: Literal["auto", "tokenizer", "text"] = Field(
        "auto", description="auto, tokenizer or text (see above)."
    )
    text: str = Field(
        "gpl-3.0",
        description="Name of the text in data/texts/texts.yaml prompts are cut from.",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of every draw (lengths, windows, prefixes, questions).",
    )
    ignore_eos: bool = Field(
        True,
        description="Ask for exactly the drawn output length (ignore_eos, min_tokens).",
    )
    temperature: float = Field(
        0.0, ge=0.0, description="Sampling temperature (0 = greedy)."
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_ints(cls, data):
        if isinstance(data, dict):
            data = dict(data)
            for k in (
                "prompt_tokens",
                "output_tokens",
                "prefix_tokens",
                "question_tokens",
                "tool_result_tokens",
            ):
                if isinstance(data.get(k), int):
                    data[k] = {"dist": "fixed", "value": data[k]}
        return data

    @model_validator(mode="after")
    def _messages(self) -> Workload:
        if self.kind == "messages" and not self.messages:
            raise ValueError("a messages workload needs messages")
        if self.kind == "trace" and not self.trace:
            raise ValueError("a trace workload needs trace: the trace file")
        return self

    def describe(self) -> str:
        out = f"output {self.output_tokens.describe()} tokens"
        if self.kind == "synthetic":
            return f"synthetic prompts of {self.prompt_tokens.describe()} tokens, {out} (seed {self.seed})"
        if self.kind == "shared_prefix":
            return (
                f"{self.prefixes} shared prefixes of {self.prefix_tokens.describe()} tokens × {self.questions} "
                f"questions of {self.question_tokens.describe()} tokens, {out} (seed {self.seed})"
            )
        if self.kind == "trace":
            return f"replay of the trace {self.trace} ({self.trace_format}, at most {self.max_rows} rows)"
        if self.kind == "multi_turn":
            return (
                f"conversations of {self.turns} turns, {self.prompt_tokens.describe()} new tokens a turn, "
                f"{out}, think time {self.think_time_s:g} s (seed {self.seed})"
            )
        if self.kind == "agent":
            return (
                f"agent sessions of {self.turns} model calls with tools: a task of {self.prompt_tokens.describe()} "
                f"tokens, then a tool result of {self.tool_result_tokens.describe()} tokens a turn, {out}, "
                f"tool time {self.think_time_s:g} s (seed {self.seed})"
            )
        return f"a fixed conversation of {len(self.messages)} message(s), {out}"


class Slo(BaseModel):
    """Latency objectives on percentiles, judged from order statistics at ``confidence``: a level
    meets them when the upper confidence bound of every named percentile is within its limit, and
    misses them when one lower bound is above its limit (a failed request counts as never
    answering: it can only push a percentile up)."""

    model_config = ConfigDict(extra="forbid")
    percentile: float = Field(
        95.0,
        gt=0,
        lt=100,
        description="The percentile every limit applies to (95: p95).",
    )
    ttft_ms: float | None = Field(
        500.0,
        gt=0,
        description="Limit on that percentile of TTFT (null: none). MLPerf interactive: 500 ms.",
    )
    tpot_ms: float | None = Field(
        50.0, gt=0, description="Limit on that percentile of TPOT (null: none)."
    )
    e2e_ms: float | None = Field(
        None, gt=0, description="Limit on that percentile of E2E latency (null: none)."
    )
    confidence: float = Field(
        0.95, gt=0.5, lt=1.0, description="Confidence of every meets/misses verdict."
    )

    @model_validator(mode="after")
    def _one(self) -> Slo:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("an SLO needs at least one of ttft_ms, tpot_ms, e2e_ms")
        return self

    def limits(self) -> dict[str, float]:
        return {
            k: v
            for k, v in (
                ("ttft_ms", self.ttft_ms),
                ("tpot_ms", self.tpot_ms),
                ("e2e_ms", self.e2e_ms),
            )
            if v is not None
        }

    def describe(self) -> str:
        p = f"p{self.percentile:g}"
        names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
        return ", ".join(f"{p} {names[k]} ≤ {v:g} ms" for k, v in self.limits().items())
