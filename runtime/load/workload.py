"""Requests from a workload spec (``core.kinds.workload.Workload``): seeded, reproducible.

Prompts are cut from a public text (data/texts/). With the server's tokenizer (``source:
tokenizer``, or ``auto`` where the server has /tokenize and /detokenize, as llama-server does) a
prompt is exactly the drawn number of tokens before the chat template: a window of token ids
at a seeded offset, turned back into text by the server itself. Without one (``text``) a prompt
is about 4 characters per token, cut at a word boundary; the server's usage.prompt_tokens then
says what it really was, and the artifact records which way was used.

Synthetic prompts start with a unique tag (``[r<level>.<i>]``), so no two requests share a
prefix beyond the chat template: a server's prompt cache (llama-server keeps up to 8 GiB of past
prompts) cannot make one level faster than another by remembering the last one. The
shared-prefix workload does the opposite on purpose: ``prefixes`` prefixes, each reused by
many requests, and its artifact reports the prefix cache hit rate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core import safefile
from core.errors import ConfigError
from core.kinds.workload import Workload
from core.paths import data_dir, project_root, relpath

MAX_TEXT_BYTES = (
    64 << 20
)  # a workload text (a corpus to cut prompts from) larger than this is refused

UNIQUE_TAIL = 8  # tokens at the end of a trace prompt that no other prompt shares
CHARS_PER_TOKEN = 4.0  # the rule of thumb when no tokenizer is at hand (English prose)


@dataclass
class Request:
    """One request of a workload: its body fields (messages, max_tokens ...) and what was asked."""

    body: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


def corpus(name: str) -> tuple[str, dict[str, Any]]:
    """The text named in data/texts/texts.yaml (the data dir's, else the project's)."""
    from core.yamlio import load_yaml

    path = data_dir() / "texts" / "texts.yaml"
    if not path.exists():
        path = project_root() / "data" / "texts" / "texts.yaml"
    raw = load_yaml(path) or {}
    texts = raw.get("texts") if isinstance(raw, dict) else None
    if (
        not isinstance(texts, dict)
        or name not in texts
        or not isinstance(texts[name], dict)
    ):
        raise ConfigError(
            f"no text named {name!r} (known: {', '.join(sorted(texts or {}))})",
            file=relpath(path),
            field="texts",
        )
    file = path.parent / str(texts[name].get("file", ""))
    if not file.exists() and not file.is_symlink():
        raise ConfigError(
            f"text file {texts[name].get('file')!r} not found",
            file=relpath(path),
            field=f"texts.{name}.file",
        )
    # a FIFO or a device refused unopened, a text bounded like any input file
    data = safefile.read_bytes(
        file, max_bytes=MAX_TEXT_BYTES, what="text file", error=ConfigError
    )
    return data.decode("utf-8", "replace"), {
        "name": name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "source": texts[name].get("source"),
    }


class Cutter:
    """Cuts prompts of a given token count from the text, with the server's tokenizer or by characters."""

    def __init__(self, transport: Any, client: Any, text: str, mode: str):
        self.transport, self.client, self.text, self.mode = (
            transport,
            client,
            text,
            mode,
        )
        self.ids: list[int] = []

    @classmethod
    async def make(cls, transport: Any, client: Any, spec: Workload) -> Cutter:
        text, _ = corpus(spec.text)
        if spec.source in ("auto", "tokenizer"):
            ids = await transport.tokenize(client, text)
            if ids:
                c = cls(transport, client, text, "tokenizer")
                c.ids = ids
                return c
            if spec.source == "tokenizer":
                raise ConfigError(
                    "the server exposes no tokenizer (/tokenize): use source: text or auto",
                    field="workload.source",
                )
        words = text.split()
        return cls(transport, client, " ".join(words), "text")

    @property
    def size(self) -> int:
        return (
            len(self.ids)
            if self.mode == "tokenizer"
            else int(len(self.text) / CHARS_PER_TOKEN)
        )

    def window_ids(self, rng: np.random.Generator, tokens: int) -> list[int]:
        """``tokens`` token ids at a seeded place in the text (tokenizer mode; wraps around)."""
        ids = self.ids * (1 + tokens // max(1, len(self.ids)))
        off = int(rng.integers(0, max(1, len(self.ids))))
        return (ids + ids)[off : off + tokens]

    async def count(self, text: str) -> int | None:
        """Tokens of ``text`` by the server's own tokenizer (None in text mode: no tokenizer)."""
        if self.mode != "tokenizer":
            return None
        ids = await self.transport.tokenize(self.client, text)
        return len(ids) if ids is not None else None

    async def blocks(
        self,
        rng: np.random.Generator,
        hash_ids: list[int],
        block: int,
        tokens: int,
        tag: str,
    ) -> str:
        """A prompt of ``tokens`` tokens made of shared blocks (one per hash id, the same text for the same
        id: Mooncake's prefix blocks), then a unique tail (``tag`` and a window of its own)."""
        if self.mode == "tokenizer":
            ids: list[int] = []
            for h in hash_ids:
                if len(ids) >= tokens:
                    break
                ids += self.window_ids(
                    np.random.default_rng([int(h) % (1 << 63), 7]), block
                )
            ids = ids[
                : max(0, tokens - UNIQUE_TAIL)
            ]  # every prompt ends in a tail of its own
            tag_ids = (await self.transport.tokenize(self.client, tag)) or []
            rest = max(0, tokens - len(ids) - len(tag_ids))
            ids = ids + list(tag_ids) + self.window_ids(rng, rest)
            out = await self.transport.detokenize(self.client, ids[: max(1, tokens)])
            if out is None:
                raise ConfigError(
                    "the server's /detokenize failed while building prompts",
                    field="workload.source",
                )
            return out
        parts: list[str] = []
        for h in hash_ids:
            if len(parts) * block >= tokens:
                break
            parts.append(
                await self.cut(np.random.default_rng([int(h) % (1 << 63), 7]), block)
            )
        head = " ".join(parts)[: int(max(0, tokens - UNIQUE_TAIL) * CHARS_PER_TOKEN)]
        rest = tokens - int(len(head) / CHARS_PER_TOKEN)
        return head + (" " + await self.cut(rng, rest, tag=tag) if rest > 0 else "")

    async def cut(self, rng: np.random.Generator, tokens: int, tag: str = "") -> str:
        """A prompt of ``tokens`` tokens (tag included) at a seeded place in the text."""
        if self.mode == "tokenizer":
            tag_ids = (await self.transport.tokenize(self.client, tag)) if tag else []
            want = max(1, tokens - len(tag_ids or []))
            ids = self.ids * (
                1 + want // max(1, len(self.ids))
            )  # a prompt longer than the text wraps around
            off = int(rng.integers(0, max(1, len(self.ids))))
            window = (ids + ids)[off : off + want]
            out = await self.transport.detokenize(
                self.client, list(tag_ids or []) + window
            )
            if out is None:
                raise ConfigError(
                    "the server's /detokenize failed while building prompts",
                    field="workload.source",
                )
            return out
        chars = max(1, int(tokens * CHARS_PER_TOKEN) - len(tag))
        text = self.text
        reps = text * (1 + chars // max(1, len(text)))
        off = int(rng.integers(0, max(1, len(text))))
        span = (reps + reps)[off : off + chars]
        cut = span.find(" ")  # start and end at word boundaries
        span = span[cut + 1 :] if 0 <= cut < len(span) // 4 else span
        return tag + span


def _sampling(spec: Workload, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": int(max_tokens),
        "temperature": spec.temperature,
    }
    if spec.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = int(max_tokens)
    return body


async def build(
    transport: Any, client: Any, spec: Workload, n: int, level_index: int = 0
) -> tuple[list[Request], dict[str, Any]]:
    """``n`` requests of the workload for one level (level_index keys the draws, so levels never
    repeat one another's synthetic prompts), and what was used to build them."""
    rng = np.random.default_rng([spec.seed, level_index])
    outs = spec.output_tokens.sample(rng, n)
    info: dict[str, Any] = {"kind": spec.kind, "describe": spec.describe()}
    if spec.kind == "messages":
        msgs = [m.model_dump() for m in spec.messages]
        return [
            Request(
                {"messages": msgs, **_sampling(spec, o)}, {"output_tokens_requested": o}
            )
            for o in outs
        ], {**info, "source": "messages"}
    cutter = await Cutter.make(transport, client, spec)
    _, text_info = corpus(spec.text)
    info.update(
        source=cutter.mode,
        text=text_info,
        text_tokens=cutter.size,
        chars_per_token=CHARS_PER_TOKEN if cutter.mode == "text" else None,
    )
    reqs: list[Request] = []
    if spec.kind == "trace":
        return await _trace(cutter, spec, n, level_index, info)
    if spec.kind == "agent":
        return await _agent(cutter, spec, rng, outs, level_index, info)
    if spec.kind in ("synthetic", "multi_turn"):
        lens = spec.prompt_tokens.sample(rng, n)
        for i, (p, o) in enumerate(zip(lens, outs)):
            meta: dict[str, Any] = {
                "prompt_tokens_requested": p,
                "output_tokens_requested": o,
            }
            if spec.kind == "multi_turn":  # conversation i // turns, its turn i % turns
                meta.update(
                    session=f"{level_index}.{i // spec.turns}", turn=i % spec.turns
                )
                tag = f"[s{level_index}.{i // spec.turns}.{i % spec.turns}] "
            else:
                tag = f"[r{level_index}.{i}] "
            prompt = await cutter.cut(rng, p, tag=tag)
            meta["prompt_tokens_counted"] = await cutter.count(prompt)
            reqs.append(
                Request(
                    {
                        "messages": [{"role": "user", "content": prompt}],
                        **_sampling(spec, o),
                    },
                    meta,
                )
            )
        if spec.kind == "multi_turn":
            info.update(
                turns=spec.turns,
                think_time_s=spec.think_time_s,
                sessions=-(-n // spec.turns),
            )
        return reqs, info
    # shared prefix: the same prefixes and questions at every level (their reuse is the point)
    prng = np.random.default_rng([spec.seed, 1_000_003])
    plens = spec.prefix_tokens.sample(prng, spec.prefixes)
    qlens = spec.question_tokens.sample(prng, spec.questions)
    prefixes = [await cutter.cut(prng, t) for t in plens]
    questions = [await cutter.cut(prng, t) for t in qlens]
    pick_p = rng.integers(0, spec.prefixes, size=n)
    pick_q = rng.integers(0, spec.questions, size=n)
    for i in range(n):
        a, b = int(pick_p[i]), int(pick_q[i])
        content = f"{prefixes[a]}\n\nQuestion: {questions[b]}"
        counted = await cutter.count(content)
        reqs.append(
            Request(
                {
                    "messages": [{"role": "user", "content": content}],
                    **_sampling(spec, outs[i]),
                },
                {
                    "prefix": a,
                    "question": b,
                    "prompt_tokens_requested": plens[a] + qlens[b],
                    "prompt_tokens_counted": counted,
                    "output_tokens_requested": outs[i],
                },
            )
        )
    info.update(prefixes=spec.prefixes, questions=spec.questions)
    return reqs, info


async def _agent(
    cutter: Cutter,
    spec: Workload,
    rng: np.random.Generator,
    outs: list[int],
    level_index: int,
    info: dict[str, Any],
) -> tuple[list[Request], dict[str, Any]]:
    """Agent sessions (``runtime.load.agent``): request i is turn i % turns of session i // turns; the
    first turn a system prompt and a task, every later one a tool result (the scheduler puts the model's
    answers and tool calls between them)."""
    from runtime.load import agent

    n = len(outs)
    tasks = spec.prompt_tokens.sample(rng, n)
    results = spec.tool_result_tokens.sample(rng, n)
    reqs = []
    for i, o in enumerate(outs):
        session, turn = f"{level_index}.{i // spec.turns}", i % spec.turns
        tag = f"[a{session}.{turn}] "
        want = tasks[i] if turn == 0 else results[i]
        text = await cutter.cut(rng, want, tag=tag)
        messages = agent.first_messages(text) if turn == 0 else agent.tool_result(text)
        reqs.append(
            Request(
                {
                    "messages": messages,
                    **_sampling(spec, o),
                    **agent.request_fields(spec.tool_choice),
                },
                {
                    "session": session,
                    "turn": turn,
                    "prompt_tokens_requested": want,
                    "prompt_tokens_counted": await cutter.count(text),
                    "output_tokens_requested": o,
                },
            )
        )
    info.update(
        turns=spec.turns,
        think_time_s=spec.think_time_s,
        sessions=-(-n // spec.turns),
        tools=[t["function"]["name"] for t in agent.TOOLS],
        tool_choice=spec.tool_choice,
    )
    return reqs, info


def trace_path(name: str) -> Path:
    """A trace named in a spec: absolute, or relative to the data folder (then the project)."""
    p = Path(name).expanduser()
    if p.is_absolute():
        return p
    for base in (data_dir(), project_root()):
        if (base / p).exists():
            return base / p
    return data_dir() / p


async def _trace(
    cutter: Cutter, spec: Workload, n: int, level_index: int, info: dict[str, Any]
):
    """The trace's rows as requests (the first ``n`` rows: a level sends at most its planned count):
    each prompt synthesized to the row's input length (shared blocks for its hash ids), its answer the
    row's output length; ``trace_t_s`` in each request's meta is its arrival in the trace."""
    from core import traces

    tr = traces.read(
        trace_path(spec.trace or ""), spec.trace_format, spec.max_rows, spec.max_context
    )
    rows = tr.rows[:n]
    rng = np.random.default_rng([spec.seed, level_index, 31])
    reqs = []
    for i, row in enumerate(rows):
        prompt = await cutter.blocks(
            rng,
            row.hash_ids,
            spec.block_tokens,
            row.input_tokens,
            f"[t{level_index}.{i}] ",
        )
        meta: dict[str, Any] = {
            "trace_row": row.row,
            "trace_t_s": round(row.t_s, 6),
            "prompt_tokens_requested": row.input_tokens,
            "prompt_tokens_counted": await cutter.count(prompt),
            "output_tokens_requested": row.output_tokens,
        }
        if row.session:
            meta["session"] = row.session
        reqs.append(
            Request(
                {
                    "messages": [{"role": "user", "content": prompt}],
                    **_sampling(spec, row.output_tokens),
                },
                meta,
            )
        )
    t = dict(tr.info)
    if len(rows) < len(tr.rows):
        t["replayed"] = len(rows)
    info.update(trace=t, trace_text=traces.describe(tr.info))
    return reqs, info
