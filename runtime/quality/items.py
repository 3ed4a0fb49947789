"""The shapes of a quality suite file and of one rendered item (runtime.quality.suites loads them;
generators and public-set adapters produce items)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SUITE_FORMAT_VERSION = 1


class Generation(BaseModel):
    """Generation parameters (a matrix may override them)."""

    model_config = ConfigDict(extra="forbid")
    max_tokens: int = Field(128, ge=1, description="Tokens generated per item at most.")
    temperature: float = Field(
        0.0, ge=0.0, description="Sampling temperature (0 = greedy, reproducible)."
    )
    top_k: int = Field(40, ge=0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    min_p: float = Field(0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(1.0, gt=0.0)


class ItemSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
    prompt: str = Field(..., min_length=1, description="The user message.")
    system: str | None = Field(None, description="An optional system message.")
    scorer: str | None = Field(
        None, description="Scorer of this item (default: the suite's)."
    )
    check: dict[str, Any] = Field(
        ..., description="What the scorer checks (its own fields)."
    )
    expected: str | None = Field(
        None,
        description="The expected answer in words, for pages (default: from the check).",
    )
    tags: list[str] = Field(
        default_factory=list, description="Tiers or topics, e.g. T1."
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Overrides the suite's max_tokens for this item."
    )


PROMPT_STYLES = ("chat", "completion", "loglikelihood")
LETTERS = "ABCDEFGHIJ"
#: lm-evaluation-harness's stop sequences of HumanEval in completion form
HUMANEVAL_STOP = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]
ANSWER_STOP = ["\n"]


class MCItemSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
    question: str = Field(..., min_length=1)
    choices: list[str] = Field(
        ..., min_length=2, max_length=len(LETTERS), description="The choices, in order."
    )
    answer: int = Field(
        ..., ge=0, description="Index of the correct choice (0 = first)."
    )
    tags: list[str] = Field(default_factory=list)


class FewShot(BaseModel):
    """One solved example put in front of a completion prompt: a multiple-choice one
    (question, choices, answer index) or a plain one (prompt, answer text)."""

    model_config = ConfigDict(extra="forbid")
    question: str | None = None
    choices: list[str] | None = None
    prompt: str | None = None
    answer: int | str


class NeedleGenerator(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = Field("needle", pattern="^needle$")
    context_tokens: list[int] = Field(
        ..., min_length=1, description="Haystack lengths (estimated tokens)."
    )
    depths: list[float] = Field(
        ..., min_length=1, description="Needle positions, 0 = start, 1 = end."
    )
    seed: int = Field(0, description="Seed of the haystack text and the hidden values.")
    chars_per_token: float = Field(
        4.0,
        gt=0,
        description="Estimate used to size the haystack; the run records real prompt tokens.",
    )


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    adapter: str = Field(..., description="Public set adapter: humaneval or ifbench.")
    options: dict[str, Any] = Field(default_factory=dict)


class SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(SUITE_FORMAT_VERSION)
    name: str = Field(..., min_length=1, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: int = Field(..., ge=1, description="Version of the suite's content.")
    category: str = Field(
        ...,
        description="Seed category: instruction_precision, math, long_context, agentic, coder, general.",
    )
    description: str = ""
    include: str | list[str] | None = None
    scorer: str | None = None
    generation: Generation = Field(default_factory=Generation)
    items: list[ItemSpec] = Field(default_factory=list)
    mc_items: list[MCItemSpec] = Field(
        default_factory=list, description="Multiple-choice items (any prompt style)."
    )
    prompt_styles: list[str] = Field(
        default_factory=lambda: ["chat"],
        min_length=1,
        description="Prompt styles this suite supports, preferred first.",
    )
    fewshot: list[FewShot] = Field(
        default_factory=list, description="Solved examples for the completion style."
    )
    generator: NeedleGenerator | None = None
    source: Source | None = None


@dataclass
class Item:
    id: str
    messages: list[dict[str, str]]
    scorer: str
    check: dict[str, Any]
    expected: str
    tags: list[str] = field(default_factory=list)
    max_tokens: int | None = None
    style: str = "chat"
    text: str | None = None  # completion: the raw prompt; loglikelihood: the context
    continuations: list[str] | None = None  # loglikelihood: one per choice
    stop: list[str] | None = None  # completion: stop sequences

    @property
    def prompt(self) -> str:
        return self.text if self.text is not None else self.messages[-1]["content"]

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id,
            "messages": self.messages,
            "scorer": self.scorer,
            "check": self.check,
            "expected": self.expected,
            "tags": self.tags,
            "max_tokens": self.max_tokens,
        }
        if self.style != "chat":  # chat items keep their old shape (and content hash)
            d.update(
                style=self.style,
                text=self.text,
                continuations=self.continuations,
                stop=self.stop,
            )
        return d
