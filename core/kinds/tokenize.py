"""The ``tokenize`` kind: a tokenize-heavy workload served one request at a time and batched.

Seed 003's phase 1 batches requests (1,000 tokenize requests: 15 s one by one, 2 s in batches of
10). Here ``requests`` texts (passages of a committed text, in turn) are sent to the server's
/tokenize by ``clients`` clients at once: one text a request, then ``batch`` texts a request (a list
of texts in one body; the server tokenizes every one of them). The two arms alternate over
``rounds`` (ABAB: slow drift hits both); each round gives both wall times and their ratio, the
batching speed-up.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Details, Kind, Samples, Shape, TestSpec


class TokenizeTest(TestSpec):
    """Tokenize requests one by one and batched, in alternating rounds."""

    kind: Literal["tokenize"] = "tokenize"
    id: str = Field("tokenize", description="Name of this workload, used in tables.")
    corpus: str = Field(
        "gpl-3.0", description="A text of data/texts/texts.yaml, cut into passages."
    )
    requests: int = Field(
        1000, ge=1, le=100_000, description="Texts tokenized in each arm."
    )
    batch: int = Field(10, ge=2, le=1000, description="Texts per batched request.")
    clients: int = Field(
        1, ge=1, le=64, description="Clients sending at once (each its share)."
    )
    rounds: int = Field(3, ge=1, le=20, description="Rounds of both arms (ABAB).")

    METHOD_FIELDS: ClassVar[frozenset[str]] = TestSpec.METHOD_FIELDS | {"rounds"}

    @property
    def name(self) -> str:
        return self.id


class TokenizeRound(Shape):
    one_by_one_s: float | None = Field(
        None, description="Wall time, one text a request."
    )
    batched_s: float | None = Field(
        None, description="Wall time, `batch` texts a request."
    )
    failed: int | None = Field(None, description="Requests that failed in the round.")


class TokenizeSamples(Samples):
    rounds: list[TokenizeRound] | None = None


class TokenizeDetails(Details):
    corpus: str | None = None
    texts: int | None = None
    tokens_per_pass: int | None = Field(
        None, description="Tokens of all the texts (the server's count)."
    )
    tokens_per_pass_batched: int | None = Field(
        None,
        description="The same, sent in batches (the same work: equal to tokens_per_pass).",
    )
    endpoint: str | None = None


def _values(samples: TokenizeSamples, metric: str) -> list[float]:
    rounds = [r for r in samples.rounds or [] if r.one_by_one_s and r.batched_s]
    if metric == "batching_speedup":
        return [r.one_by_one_s / r.batched_s for r in rounds]  # type: ignore[operator]
    if metric == "tokenize_one_by_one_s":
        return [float(r.one_by_one_s) for r in rounds]  # type: ignore[arg-type]
    if metric == "tokenize_batched_s":
        return [float(r.batched_s) for r in rounds]  # type: ignore[arg-type]
    return []


KIND = register(
    Kind(
        "tokenize",
        TokenizeTest,
        "Tokenize requests one by one and batched (a list of texts a request), in alternating rounds.",
        headline="batching_speedup",
        columns=("batching_speedup", "tokenize_one_by_one_s", "tokenize_batched_s"),
        metrics=(
            "batching_speedup",
            "tokenize_one_by_one_s",
            "tokenize_batched_s",
            "startup_ms",
        ),
        details=TokenizeDetails,
        samples=TokenizeSamples,
        values=_values,
    )
)
