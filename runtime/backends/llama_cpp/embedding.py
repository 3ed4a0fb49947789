"""The ``embed`` kind on llama.cpp in process (core.kinds.embed): a committed corpus embedded in
embedding mode (mean pooling), timed per repetition; an exact index built from the vectors (timed,
sized) and every passage looked up in it once."""

from __future__ import annotations

from typing import Any

from core.kinds import embed as embed_kind
from core.kinds.embed import INDEX, EmbedTest
from core.texts import passages
from runtime.backends.base import TestResult


def run(llm: Any, test: EmbedTest) -> TestResult:
    from core.texts import load_text

    corpus = load_text(test.corpus)
    docs = passages(corpus.read(), test.max_passages)
    tokens = sum(len(llm.tokenize(d.encode("utf-8"), add_bos=True)) for d in docs)
    too_long = max(len(llm.tokenize(d.encode("utf-8"), add_bos=True)) for d in docs)
    if too_long > llm.n_batch:
        raise ValueError(
            f"a passage of {too_long} tokens does not fit n_batch {llm.n_batch}: raise n_batch"
        )
    # the kind's loop (core.kinds.embed.run_embed) over this backend's one primitive: one embed call
    run = embed_kind.run_embed(
        test, docs, lambda texts: llm.embed(texts, normalize=False)
    )
    return TestResult(
        metrics=run.metrics,
        samples=run.samples,
        details={
            "corpus": corpus.name,
            "corpus_sha256": corpus.sha256,
            "tokens": tokens,
            "pooling": "mean",
            **run.details,
            "method": f"llama.cpp embedding mode (mean pooling) in process, {test.batch} passages per "
            f"call; then the index built ({INDEX}) and every passage looked up once",
        },
    )
