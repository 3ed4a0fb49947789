"""The ``generate`` test kind: greedy generation on a workload's prompts, outputs kept.

Speculative decoding and MoE expert reduction are judged on two things: how fast the
model generates, and whether the text is still the baseline's. A ``generate`` test runs
each prompt of a workload through the model's chat template with greedy sampling and
records, per prompt, the generated token ids and text (so the lossless check compares
artifacts alone), the time to the first token, the generation rate after it, and, when a
draft is active, how many drafted tokens the target accepted.

Built-in workloads (``workload:``) follow the seed's tracks: ``edit`` and ``summarise``
hand the model a text to rework (prompt lookup finds its continuations in the prompt),
``free`` asks for new text (nothing to look up). ``prompts:`` replaces them with your own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from core.kinds import register
from core.kinds.base import Details, Kind, Samples, Shape, SpeculativeStats, TestSpec

_PASSAGE = (
    "The lighthouse at Gull Point was built in 1871 to guide ships past the rocks at the mouth of the bay. "
    "For more than a century its keepers climbed the hundred and twelve steps every evening to light the lamp, "
    "and every morning they climbed them again to trim the wick and polish the lens. The last keeper, a quiet "
    "man named Thomas Avery, left in 1987, when the light was automated and the keeper's cottage was sold. "
    "Today the tower belongs to the town, which opens it to visitors on summer weekends. From the gallery at "
    "the top you can see the whole coast, from the fishing harbour in the north to the long white beach in "
    "the south."
)
_PASSAGE_TYPOS = (
    "The lighthouse at Gull Point was bilt in 1871 to guide ships past the rocks at the mouth of the bay. "
    "For more than a century its keepers climed the hundred and twelve steps every evening to light the lamp, "
    "and every morning they climbed them again to trim the wick and polish the lense. The last keeper, a quiet "
    "man named Thomas Avery, left in 1987, when the light was automated and the keepers cottage was sold. "
    "Today the tower belongs to the town, wich opens it to visitors on summer weekends."
)
_NOTES = (
    "Meeting notes, 12 March. Present: Ana, Ben, Chloe, David. The team agreed to move the release of version "
    "2.4 from 20 March to 27 March, because the new export feature still fails on files larger than two "
    "gigabytes. Ben will fix the export bug by 18 March. Chloe will update the user guide and the release "
    "notes. David will ask the support team which customers are waiting for the export feature. Ana will "
    "prepare the announcement for the mailing list and send it on the day of the release. The next meeting "
    "is on 19 March."
)
_CODE = (
    "def average(values):\n"
    "    total = 0\n"
    "    for value in values:\n"
    "        total = total + value\n"
    "    return total / len(values)\n"
)

WORKLOADS: dict[str, tuple[str, ...]] = {
    "edit": (
        "Correct the spelling mistakes in the following text. Reply with the corrected text only.\n\n"
        + _PASSAGE_TYPOS,
        "Rename the function average to mean in the following code. Reply with the full code only.\n\n"
        + _CODE,
    ),
    "summarise": (
        _PASSAGE
        + "\n\nSummarise the text above in three sentences, reusing its wording.",
        _NOTES
        + "\n\nList every action item from these notes, with the person and the date.",
    ),
    "free": (
        "Write a short poem about the sea.",
        "Give three tips for learning a new language.",
    ),
}
WORKLOAD_HELP = {
    "edit": "rework a given text (spelling fixes, a rename): the answer repeats most of the prompt",
    "summarise": "summarise a given text or extract its action items: the answer reuses phrases of the prompt",
    "free": "free generation: nothing in the prompt to copy",
}


class GenerateTest(TestSpec):
    """Generation on a workload's prompts (greedy unless a temperature is set): outputs (token
    ids, text), generation rate, draft acceptance."""

    kind: Literal["generate"] = "generate"
    id: str = Field(
        "", description="Name of this test in tables; default: the workload's name."
    )
    workload: Literal["edit", "summarise", "free"] = Field(
        "free",
        description="Built-in prompts: "
        + "; ".join(f"{k}: {v}" for k, v in WORKLOAD_HELP.items())
        + ".",
    )
    prompts: list[str] = Field(
        default_factory=list,
        description="Your own user prompts (replace the workload's).",
    )
    max_tokens: int = Field(
        64, ge=1, le=8192, description="Tokens generated per prompt at most."
    )
    ignore_eos: bool = Field(
        False,
        description="Keep generating past end-of-generation tokens up to max_tokens.",
    )
    temperature: float = Field(
        0.0,
        ge=0.0,
        le=2.0,
        description="Sampling temperature: 0 = greedy (the default; the lossless check compares greedy "
        "texts); above 0 each token is sampled (llama-cpp-python's top_k 40, top_p 0.95, min_p 0.05) "
        "from a generator seeded per prompt (seed + prompt index), so a repetition samples the same way.",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Sampling seed when temperature > 0 (plus the prompt's index).",
    )

    # left out of the stored test (and so of the configuration key) while at their defaults: the greedy
    # tests measured before these fields existed keep their identity
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("temperature", "seed")

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for name in self.OMITTED_AT_DEFAULT:
            if d.get(name) == type(self).model_fields[name].default:
                d.pop(name, None)
        return d

    @model_validator(mode="after")
    def _fill(self) -> GenerateTest:
        custom = bool(self.prompts)
        if not custom:
            self.prompts = list(
                WORKLOADS[self.workload]
            )  # recorded in the artifact: part of the test's identity
        if any(not p.strip() for p in self.prompts):
            raise ValueError("prompts must not be empty strings")
        if not self.id:
            self.id = "custom" if custom else self.workload
        return self

    @property
    def name(self) -> str:
        return self.id


class GenerateRepetition(Shape):
    """One pass over every prompt."""

    repetition: int | None = None
    generation_tps: float | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    draft_proposed: int | None = None
    draft_accepted: int | None = None
    draft_acceptance: float | None = Field(
        None, description="Accepted / proposed drafted tokens, in percent."
    )


class GenerateRequest(Shape):
    """One prompt of one repetition."""

    repetition: int | None = None
    prompt_index: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    gen_steps: int | None = None
    gen_ms: float | None = None
    draft: dict[str, Any] | None = None


class GenerateOutput(Shape):
    """The greedy output of one prompt (the first repetition's): what the lossless check compares."""

    prompt_index: int | None = None
    token_ids: list[int] = Field(default_factory=list)
    finish_reason: str | None = None
    text: str = ""


class GenerateSamples(Samples):
    repetitions: list[GenerateRepetition] | None = None
    requests: list[GenerateRequest] | None = None


class GenerateDetails(Details):
    outputs: list[GenerateOutput] | None = None
    outputs_repeatable: bool | None = Field(
        None, description="Every repetition produced the same token ids."
    )
    greedy: bool | None = None
    prompts: int | None = None
    warmup: bool | None = None
    repetitions: int | None = None
    speculative: SpeculativeStats | None = None


_PER_REPETITION = ("generation_tps", "draft_acceptance")


# -- the kind's loop ---------------------------------------------------------------------------
@dataclass
class GenerateRun:
    """What :func:`run_generate` measured: its metrics, samples and details (every backend's)."""

    metrics: dict[str, list[float]]
    samples: dict[str, Any]
    details: dict[str, Any]


def run_generate(
    test: GenerateTest,
    n_prompts: int,
    generate: Callable[[int, int], dict[str, Any]],
    text: Callable[[list[int], int], str],
    drafts: bool = False,
) -> GenerateRun:
    """The generate kind's loop over one backend primitive, ``generate(prompt_index, max_tokens)
    -> record`` (one greedy generation, timed by the backend: prompt_tokens, output_tokens,
    finish_reason, ttft_ms, e2e_ms, gen_steps, gen_ms, token_ids and, with a draft active,
    ``draft``: what was drafted and accepted in it). One untimed warm-up of at most 8 tokens on
    the first prompt (unless the test turns it off), then every prompt once per repetition until
    the precision target on the generation rate or the fixed count (1 by default). ``text(ids,
    prompt_index)`` gives the text of the first repetition's outputs; the ids are kept once, in
    ``details.outputs``, and whether every repetition gave the same ids is recorded."""
    import numpy as np

    from core.precision import Repeater

    warm = test.warmup is not False
    if warm:
        generate(0, min(8, test.max_tokens))
    repeater = Repeater(test.precision, test.repetitions or 1, "generation_tps")
    records: list[dict[str, Any]] = []
    per_rep: list[dict[str, Any]] = []
    while repeater.more():
        r = len(per_rep)
        recs = []
        for i in range(n_prompts):
            rec = generate(i, test.max_tokens)
            rec.update(repetition=r, prompt_index=i)
            recs.append(rec)
        records += recs
        steps = sum(x["gen_steps"] for x in recs if x["gen_ms"])
        ms = sum(x["gen_ms"] for x in recs if x["gen_ms"])
        rep = {
            "repetition": r,
            "generation_tps": steps * 1000.0 / ms if ms else None,
            "output_tokens": sum(x["output_tokens"] for x in recs),
            "ttft_ms": float(
                np.mean([x["ttft_ms"] for x in recs if x["ttft_ms"] is not None])
            )
            if recs
            else None,
            "e2e_ms": sum(x["e2e_ms"] for x in recs),
        }
        if drafts:
            prop = sum(x["draft"]["proposed"] for x in recs)
            acc = sum(x["draft"]["accepted"] for x in recs)
            rep.update(
                draft_proposed=prop,
                draft_accepted=acc,
                draft_acceptance=100.0 * acc / prop if prop else None,
            )
        per_rep.append(rep)
        repeater.add(rep.get(repeater.metric))

    first = [x for x in records if x["repetition"] == 0]
    outputs = [
        {
            "prompt_index": x["prompt_index"],
            "token_ids": x["token_ids"],
            "finish_reason": x["finish_reason"],
            "text": text(x["token_ids"], x["prompt_index"]),
        }
        for x in first
    ]
    consistent = all(
        x["token_ids"] == first[x["prompt_index"]]["token_ids"] for x in records
    )
    for x in records:  # ids are kept once, in details.outputs
        x.pop("token_ids", None)
    metrics: dict[str, list[float]] = {
        "generation_tps": [
            r["generation_tps"] for r in per_rep if r["generation_tps"] is not None
        ],
        "ttft_ms": [x["ttft_ms"] for x in records if x["ttft_ms"] is not None],
        "e2e_ms": [x["e2e_ms"] for x in records],
        "output_tokens": [x["output_tokens"] for x in records],
    }
    if drafts:
        metrics["draft_acceptance"] = [
            r["draft_acceptance"] for r in per_rep if r["draft_acceptance"] is not None
        ]
    details: dict[str, Any] = {
        "outputs": outputs,
        "outputs_repeatable": consistent,
        "greedy": True,
        "prompts": n_prompts,
        "warmup": warm,
        "repetitions": len(per_rep),
        "precision": repeater.record(),
    }
    if drafts:  # timed requests only (the warm-up is left out)
        total = {
            k: sum(x["draft"][k] for x in records)
            for k in ("proposed", "accepted", "rounds", "empty_rounds")
        }
        total["draft_seconds"] = round(
            sum(x["draft"]["draft_seconds"] for x in records), 6
        )
        total["acceptance"] = (
            total["accepted"] / total["proposed"] if total["proposed"] else None
        )
        details["speculative"] = total
    return GenerateRun(
        metrics=metrics,
        samples={"repetitions": per_rep, "requests": records},
        details=details,
    )


def _values(samples: GenerateSamples, metric: str) -> list[float]:
    rows = samples.repetitions if metric in _PER_REPETITION else samples.requests
    out = []
    for r in rows or ():
        v = (
            getattr(r, metric, None)
            if metric in type(r).model_fields
            else (r.model_extra or {}).get(metric)
        )
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    return out


KIND = register(
    Kind(
        "generate",
        GenerateTest,
        "Greedy generation on a workload's prompts: outputs, generation rate, draft acceptance.",
        headline="generation_tps",
        columns=("generation_tps", "ttft_ms", "draft_acceptance"),
        metrics=(
            "generation_tps",
            "draft_acceptance",
            "ttft_ms",
            "e2e_ms",
            "output_tokens",
            "load_time_s",
            "peak_rss_bytes",
            "peak_vram_bytes",
        ),
        details=GenerateDetails,
        samples=GenerateSamples,
        values=_values,
    )
)
