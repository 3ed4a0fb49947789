"""The ``embed`` kind on llama.cpp in process (core.kinds.embed): a committed corpus embedded in
embedding mode (mean pooling), timed per repetition; an exact index built from the vectors (timed,
sized) and every passage looked up in it once."""

from __future__ import annotations

import time
from typing import Any

from core.kinds.embed import QUALITY_NOTE, EmbedTest
from core.precision import Repeater
from core.texts import passages
from runtime.backends.base import TestResult

INDEX = "exact: the vectors L2-normalised into one float32 matrix, searched by inner product (numpy)"


def run(llm: Any, test: EmbedTest) -> TestResult:
    import numpy as np

    from core.texts import load_text

    corpus = load_text(test.corpus)
    docs = passages(corpus.read(), test.max_passages)
    tokens = sum(len(llm.tokenize(d.encode("utf-8"), add_bos=True)) for d in docs)
    too_long = max(len(llm.tokenize(d.encode("utf-8"), add_bos=True)) for d in docs)
    if too_long > llm.n_batch:
        raise ValueError(
            f"a passage of {too_long} tokens does not fit n_batch {llm.n_batch}: raise n_batch"
        )
    batches = [docs[i : i + test.batch] for i in range(0, len(docs), test.batch)]

    def embed_all() -> list[list[float]]:
        out: list[list[float]] = []
        for b in batches:
            out.extend(llm.embed(b, normalize=False))
        return out

    warmup = True if test.warmup is None else test.warmup
    if warmup:
        llm.embed(batches[0][:1], normalize=False)
    reps = test.repetitions or 3
    rep = Repeater(test.precision, reps, "embeddings_per_second")
    ns: list[int] = []
    eps: list[float] = []
    build_ns: list[int] = []
    sizes: list[int] = []
    search_ns: list[int] = []
    self_hits = 0.0
    dim = 0
    while rep.more():
        t0 = time.perf_counter_ns()
        vecs = embed_all()
        ns.append(time.perf_counter_ns() - t0)
        eps.append(len(docs) * 1e9 / ns[-1])
        rep.add(eps[-1])
        t0 = time.perf_counter_ns()
        index = np.asarray(vecs, dtype=np.float32)
        index /= np.maximum(np.linalg.norm(index, axis=1, keepdims=True), 1e-12)
        build_ns.append(time.perf_counter_ns() - t0)
        sizes.append(int(index.nbytes))
        t0 = time.perf_counter_ns()
        nearest = np.argmax(index @ index.T, axis=1)
        search_ns.append(time.perf_counter_ns() - t0)
        self_hits = float(np.mean(nearest == np.arange(len(docs))))
        dim = int(index.shape[1])
    return TestResult(
        metrics={
            "embeddings_per_second": eps,
            "index_build_ms": [v / 1e6 for v in build_ns],
            "index_bytes": [float(sizes[-1])],
        },
        samples={
            "ns": ns,
            "eps": eps,
            "index_build_ns": build_ns,
            "index_bytes": sizes,
            "search_ns": search_ns,
        },
        details={
            "corpus": corpus.name,
            "corpus_sha256": corpus.sha256,
            "passages": len(docs),
            "tokens": tokens,
            "dim": dim,
            "pooling": "mean",
            "index": INDEX,
            "self_retrieval": self_hits,
            "quality": QUALITY_NOTE,
            "repetitions": len(ns),
            "warmup": warmup,
            "precision": rep.record(),
            "method": f"llama.cpp embedding mode (mean pooling) in process, {test.batch} passages per "
            f"call; then the index built ({INDEX}) and every passage looked up once",
        },
    )
