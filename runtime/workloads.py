"""What a run measures: test specifications, parsed from matrix YAML.

Two kinds ship with the foundation:

* ``rate``: llama-bench-style token rates. ``pp512`` (prompt processing of 512 random
  tokens), ``tg128`` (128 single-token decodes), ``pp512+tg128``, and a context depth
  suffix ``@d2048`` (that many tokens prefilled outside the timer).
* ``chat``: a real chat request through the model's template and sampler, streamed:
  TTFT, TPOT, E2E, output tokens, inter-token latency percentiles.

Other kinds register themselves in ``TEST_KINDS`` (the name is the ``kind`` field).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ConfigError
from .precision import Precision
from .yamlio import pydantic_error_line


class TestSpec(BaseModel):
    """Base of every test kind: a name, repetitions and warm-up."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    repetitions: int | None = Field(None, ge=1, description="Timed repetitions (default: the matrix's).")
    warmup: bool | None = Field(None, description="Run one untimed warm-up first (default: the matrix's).")
    precision: Precision | None = Field(None, description="Repeat until the CI95 half-width is within a target "
                                        "(default: the matrix's); null: exactly `repetitions` (or `requests`).")

    label: ClassVar[str] = ""

    @property
    def name(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def check_name(self) -> None:
        """A test's name becomes part of an artifact's file name: the rules of an artifact id
        (no hidden file, no path separator, no control characters, bounded length)."""
        name = self.name
        if not TEST_NAME_RE.match(name or "") or len(name) > 80:
            from .yamlio import quote

            raise ValueError(f"test name {quote(name)} is not a valid id: 1-80 characters, letters, digits and "
                             "._+@- , starting with a letter or digit")

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        d["name"] = self.name
        return d


TEST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@-]*$")
_RATE_RE = re.compile(r"^(?:pp(?P<pp>\d+))?(?P<plus>\+)?(?:tg(?P<tg>\d+))?(?:@d(?P<d>\d+))?$")


class RateTest(TestSpec):
    """llama-bench's method: random token ids, untimed warm-up, r timed repetitions."""

    kind: Literal["rate"] = "rate"
    n_prompt: int = Field(0, ge=0, description="Prompt tokens decoded in batches of n_batch (pp).")
    n_gen: int = Field(0, ge=0, description="Tokens generated one decode at a time (tg).")
    n_depth: int = Field(0, ge=0, description="Context tokens prefilled outside the timer before each repetition.")

    @model_validator(mode="after")
    def _something(self) -> "RateTest":
        if self.n_prompt == 0 and self.n_gen == 0:
            raise ValueError("a rate test needs n_prompt > 0 or n_gen > 0")
        return self

    @property
    def name(self) -> str:
        parts = []
        if self.n_prompt:
            parts.append(f"pp{self.n_prompt}")
        if self.n_gen:
            parts.append(f"tg{self.n_gen}")
        s = "+".join(parts)
        return f"{s}@d{self.n_depth}" if self.n_depth else s

    @classmethod
    def parse(cls, text: str) -> "RateTest":
        m = _RATE_RE.match(text.strip())
        if not m or not (m["pp"] or m["tg"]) or (m["plus"] and not (m["pp"] and m["tg"])):
            raise ValueError(f"{text!r} is not a rate test (expected e.g. pp512, tg128, pp512+tg128, tg128@d2048)")
        return cls(n_prompt=int(m["pp"] or 0), n_gen=int(m["tg"] or 0), n_depth=int(m["d"] or 0))


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class ChatTest(TestSpec):
    """A streamed chat completion through the model's chat template and sampler."""

    kind: Literal["chat"] = "chat"
    id: str = Field("chat", description="Name of this chat workload, used in tables.")
    messages: list[Message] = Field(
        default_factory=lambda: [Message(role="user", content="Explain in three sentences why the sky is blue.")],
        description="The conversation sent on every request.")
    max_tokens: int = Field(64, ge=1, description="Maximum tokens generated per request.")
    requests: int = Field(5, ge=1, description="Timed requests (the samples).")
    warmup_requests: int = Field(1, ge=0, description="Untimed requests before the timed ones.")
    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature (0 = greedy).")
    top_k: int = Field(40, ge=0, description="Top-k sampling.")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling.")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="Min-p sampling.")
    repeat_penalty: float = Field(1.0, gt=0.0, description="Repetition penalty (1.0 = off).")
    ignore_eos: bool = Field(False, description="Keep generating past EOS up to max_tokens (fixed-length decode).")

    @property
    def name(self) -> str:
        return self.id


TEST_KINDS: dict[str, type[TestSpec]] = {"rate": RateTest, "chat": ChatTest}


def register_test_kind(cls: type[TestSpec]) -> type[TestSpec]:
    kind = cls.model_fields["kind"].default
    TEST_KINDS[kind] = cls
    return cls


def parse_test(raw: Any, *, file: str | None = None, field: str = "tests") -> TestSpec:
    """A test from YAML: a short string (``pp512``) or a mapping with ``kind``."""
    try:
        if isinstance(raw, str):
            return RateTest.parse(raw)
        if not isinstance(raw, dict):
            raise ConfigError(f"expected a test name or a mapping, got {type(raw).__name__}", file=file, field=field)
        kind = raw.get("kind", "rate")
        cls = TEST_KINDS.get(kind)
        if cls is None:
            import difflib

            close = difflib.get_close_matches(str(kind), list(TEST_KINDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(TEST_KINDS))})"
            raise ConfigError(f"unknown test kind {kind!r}{hint}", file=file, field=f"{field}.kind")
        test = cls.model_validate(raw)
        test.check_name()
        return test
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc, {"*": list((TEST_KINDS.get(raw.get('kind', 'rate')) if isinstance(raw, dict) else RateTest).model_fields)}), file=file, field=field) from None
    except ValueError as exc:
        raise ConfigError(str(exc), file=file, field=field) from None


# Serving kinds (serve, concurrency) register themselves on import.
from . import serving_workloads as _serving_workloads  # noqa: E402,F401
# The greedy-generation kind of the optimization tracks (generate) registers itself on import.
from . import generation as _generation  # noqa: E402,F401
