"""Perplexity and KL-divergence against a reference model, chunked as llama.cpp's llama-perplexity.

Method (llama.cpp ``tools/perplexity/perplexity.cpp``, ``perplexity()`` and ``kl_divergence()``):

* the whole text is tokenized once with BOS; it is cut into ``n_chunk = n_tokens // n_ctx``
  chunks of ``n_ctx`` tokens (llama-perplexity needs at least ``2 * n_ctx`` tokens: so do we);
* each chunk is decoded from an empty cache with its first token replaced by BOS; only the
  second half is scored: the logits of positions ``n_ctx/2 .. n_ctx-2`` predict tokens
  ``n_ctx/2+1 .. n_ctx-1`` (``n_ctx/2 - 1`` scored tokens per chunk);
* PPL = exp(mean NLL), its uncertainty ``PPL * sqrt((E[nll^2] - E[nll]^2) / (count - 1))``,
  the standard error of the mean that llama-perplexity prints as "PPL = x +/- y";
* with a reference model (llama.cpp's "base"): per token KL(P_ref || P_model) over the whole
  vocabulary, its mean with the same standard error, median / 99th percentile / maximum,
  and top-token agreement ("Same top p") with its binomial standard error; also PPL of the
  reference and ln(PPL/PPL_ref) with the covariance-corrected uncertainty.

Difference kept on purpose: llama-perplexity stores the reference's log-probabilities as
16-bit integers in a file and skips tokens with ln p_ref <= -16 in the KL sum; here both
models run in one child process and the sum is taken in float64 over every token (the
effect is far below the standard error; ``benchmarks/perplexity_check.py`` shows it).

``python -m runtime.quality.perplexity JOB RESULT`` is the child process (started through
``runtime.execution.runner.run_child``: crash and timeout isolation, peak RSS, log captured).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.paths import data_dir, relpath, slug
from core.texts import (
    Text,
    load_text,
)
from runtime.backends.llama_cpp import (
    NAME as BACKEND,
)  # measured with llama.cpp's logits in process

METHOD_VERSION = 1


# -- texts: the registry of public texts (core.texts), read here ---------------------------------
# -- statistics (llama-perplexity's formulas) ------------------------------------------------------
def mean_and_se(total: float, total2: float, count: int) -> tuple[float, float]:
    """llama-perplexity's mean_and_uncertainty: (mean, sqrt((E[x^2]-E[x]^2)/(count-1)))."""
    if count < 1:
        return 0.0, 0.0
    f = total / count
    df = total2 / count - f * f
    return f, (math.sqrt(df / (count - 1)) if df > 0 and count > 10 else 0.0)


def summarize(acc: dict[str, Any]) -> dict[str, Any]:
    """The figures llama-perplexity prints, from the running sums of the child."""
    n = acc["count"]
    nll, nll_se = mean_and_se(acc["sum_nll"], acc["sum_nll2"], n)
    ppl = math.exp(nll)
    out: dict[str, Any] = {
        "n_scored_tokens": n,
        "nll_mean": nll,
        "nll_se": nll_se,
        "ppl": ppl,
        "ppl_se": ppl * nll_se,
    }
    if acc.get("kld_values") is not None:
        import numpy as np

        base, base_se = mean_and_se(acc["sum_nll_base"], acc["sum_nll_base2"], n)
        cov = (acc["sum_nll_nll_base"] / n - nll * base) / (n - 1) if n > 1 else 0.0
        ratio_se = math.sqrt(max(0.0, nll_se**2 + base_se**2 - 2.0 * cov))
        kld, kld_se = mean_and_se(acc["sum_kld"], acc["sum_kld2"], n)
        vals = np.sort(np.asarray(acc["kld_values"], dtype=np.float64))
        same = acc["n_same_top"] / n
        out.update(
            {
                "ppl_reference": math.exp(base),
                "ppl_reference_se": math.exp(base) * base_se,
                "ln_ppl_ratio": nll - base,
                "ln_ppl_ratio_se": ratio_se,
                "kld_mean": kld,
                "kld_se": kld_se,
                "kld_median": float(np.median(vals)),
                "kld_p99": float(np.quantile(vals, 0.99)),
                "kld_max": float(vals[-1]),
                "same_top": same,
                "same_top_se": math.sqrt(same * (1.0 - same) / (n - 1))
                if n > 1
                else 0.0,
            }
        )
    return out


# -- the child: decode chunks, accumulate sums ------------------------------------------------------
def _load(model: dict[str, Any], job: dict[str, Any]) -> Any:
    from runtime.backends.llama_cpp.backend import LlamaCppBackend
    from runtime.backends.llama_cpp.config import LlamaCppSettings
    from runtime.models.registry import ModelRef

    settings = LlamaCppSettings.model_validate(job["settings"])
    backend = LlamaCppBackend(ModelRef.from_dict(model), settings)
    backend.load()
    return backend


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    import llama_cpp as L
    import numpy as np

    from runtime.backends.llama_cpp.logprobs import decode_logits, log_softmax, tokenize

    n_ctx = job["n_ctx"]
    first = n_ctx // 2
    result: dict[str, Any] = {"status": "failed"}
    backends = []
    try:
        model = _load(job["model"], job)
        backends.append(model)
        ref = None
        if job.get("reference"):
            ref = _load(job["reference"], job)
            backends.append(ref)
            if ref.llm.n_vocab() != model.llm.n_vocab():
                result["error"] = {
                    "kind": "input",
                    "message": f"the reference has a vocabulary of {ref.llm.n_vocab()} "
                    f"tokens, the model {model.llm.n_vocab()}: KL-divergence needs the same vocabulary",
                }
                return result
        text = Path(job["text_path"]).read_text(encoding="utf-8")
        tokens = tokenize(model.llm, text, add_bos=True)
        if ref is not None and tokenize(ref.llm, text, add_bos=True) != tokens:
            result["error"] = {
                "kind": "input",
                "message": "the reference tokenizes the text differently: "
                "KL-divergence needs the same tokenizer",
            }
            return result
        result["n_tokens"] = len(tokens)
        if len(tokens) < 2 * n_ctx:
            result["error"] = {
                "kind": "input",
                "message": f"the text tokenizes to {len(tokens)} tokens; a context of "
                f"{n_ctx} needs at least {2 * n_ctx} (llama-perplexity's rule)",
            }
            return result
        n_chunk = len(tokens) // n_ctx
        if job.get("chunks"):
            n_chunk = min(n_chunk, int(job["chunks"]))
        vocab = L.llama_model_get_vocab(model.llm._model.model)
        add_bos = bool(L.llama_vocab_get_add_bos(vocab))
        bos = int(L.llama_vocab_bos(vocab))
        acc: dict[str, Any] = {"count": 0, "sum_nll": 0.0, "sum_nll2": 0.0}
        if ref is not None:
            acc.update(
                {
                    "sum_nll_base": 0.0,
                    "sum_nll_base2": 0.0,
                    "sum_nll_nll_base": 0.0,
                    "sum_kld": 0.0,
                    "sum_kld2": 0.0,
                    "n_same_top": 0,
                    "kld_values": [],
                }
            )
        per_chunk = []
        t0 = time.perf_counter()
        for i in range(n_chunk):
            toks = list(tokens[i * n_ctx : (i + 1) * n_ctx])
            if add_bos:
                toks[0] = bos
            target = np.asarray(toks[first + 1 :], dtype=np.int64)
            lm = decode_logits(model.llm, toks, first)[:-1]
            lr = decode_logits(ref.llm, toks, first)[:-1] if ref is not None else None
            chunk = {"nll": 0.0, "kld": 0.0, "same_top": 0}
            for b in range(
                0, len(target), 64
            ):  # log-softmax in blocks (262k-token vocabularies)
                lp = log_softmax(lm[b : b + 64])
                tg = target[b : b + 64]
                nll = -lp[np.arange(len(tg)), tg]
                acc["sum_nll"] += float(nll.sum())
                acc["sum_nll2"] += float((nll * nll).sum())
                chunk["nll"] += float(nll.sum())
                if lr is not None:
                    lb = log_softmax(lr[b : b + 64])
                    nllb = -lb[np.arange(len(tg)), tg]
                    kld = (np.exp(lb) * (lb - lp)).sum(axis=1)
                    same = int((lp.argmax(axis=1) == lb.argmax(axis=1)).sum())
                    acc["sum_nll_base"] += float(nllb.sum())
                    acc["sum_nll_base2"] += float((nllb * nllb).sum())
                    acc["sum_nll_nll_base"] += float((nll * nllb).sum())
                    acc["sum_kld"] += float(kld.sum())
                    acc["sum_kld2"] += float((kld * kld).sum())
                    acc["n_same_top"] += same
                    acc["kld_values"] += [float(x) for x in kld]
                    chunk["kld"] += float(kld.sum())
                    chunk["same_top"] += same
            acc["count"] += len(target)
            per_chunk.append(
                {
                    "index": i,
                    "n": len(target),
                    "ppl": math.exp(chunk["nll"] / len(target)),
                    **(
                        {
                            "kld_mean": chunk["kld"] / len(target),
                            "same_top": chunk["same_top"] / len(target),
                        }
                        if ref is not None
                        else {}
                    ),
                }
            )
        result.update(
            {
                "status": "ok",
                "n_chunk": n_chunk,
                "sums": acc,
                "chunks": per_chunk,
                "eval_s": time.perf_counter() - t0,
                "add_bos": add_bos,
                "describe": model.describe(),
                "reference_describe": ref.describe() if ref else None,
            }
        )
    except Exception as exc:
        result["error"] = {
            "kind": "error",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
        }
    finally:
        for b in backends:
            b.close()
    return result


def main(argv: list[str]) -> int:
    from core.artifacts import atomic_write_text

    job = json.loads(Path(argv[1]).read_text())
    result = run_job(job)
    atomic_write_text(Path(argv[2]), json.dumps(result, allow_nan=False))
    return 0 if result["status"] == "ok" else 3


# -- the parent: validate, run the child, write the artifact ------------------------------------------
def perplexity_dir() -> Path:
    return data_dir() / "perplexity"


def measure(
    model: str,
    *,
    reference: str | None = None,
    text: str = "gpl-3.0",
    n_ctx: int = 512,
    chunks: int | None = None,
    n_threads: int | None = None,
    force: bool = False,
    timeout_s: float = 1800.0,
    root: Path | None = None,
    rope_scaling: str = "none",
    rope_factor: int = 1,
) -> tuple[Path, bool]:
    """Measure (or find) one perplexity artifact; (path, measured_now). Bad input raises ConfigError
    before anything is written.

    ``rope_scaling`` (linear, yarn) with ``rope_factor`` N: the context is allocated at N times the
    model's trained context with RoPE scaled by N (the backend's rope_scaling: factor = n_ctx ÷
    trained), and the text is still scored in chunks of ``n_ctx`` tokens: what the scaling costs within
    a short window, where a whole N-times context is beyond the host."""
    from runtime import backends
    from runtime.execution import runner
    from runtime.hosts import fingerprint as hostinfo
    from runtime.models import registry as models

    if n_ctx < 8 or n_ctx % 2:
        raise ConfigError(
            f"n_ctx must be an even number of at least 8, got {n_ctx}", field="n_ctx"
        )
    txt = load_text(text)
    registry = models.load_registry()
    ref_m = models.resolve(model, registry)
    ref_r = models.resolve(reference, registry) if reference else None
    if ref_r is not None:
        va, vb = ref_m.facts.get("vocab_size"), ref_r.facts.get("vocab_size")
        if va != vb:
            raise ConfigError(
                f"reference {reference!r} has a vocabulary of {vb} tokens, model {model!r} of {va}: "
                "KL-divergence needs the same vocabulary",
                field="reference",
            )
    host = hostinfo.fingerprint()
    bversion = backends.version(BACKEND)
    settings: dict[str, Any] = {
        "n_ctx": n_ctx,
        "n_batch": n_ctx,
        "n_ubatch": min(512, n_ctx),
        "n_threads": n_threads,
        "flash_attn": "auto",
        "swa_full": False,
    }
    rope: dict[str, Any] = {}
    if rope_scaling != "none" or rope_factor != 1:
        trained = int(ref_m.facts.get("context_length") or 0)
        if rope_scaling not in ("linear", "yarn"):
            raise ConfigError(
                f"rope_scaling {rope_scaling!r}: linear or yarn (with a factor above 1)",
                field="rope_scaling",
            )
        if rope_factor < 2 or not trained:
            raise ConfigError(
                f"rope_scaling {rope_scaling} with factor {rope_factor}: "
                + (
                    f"{model} does not state its trained context"
                    if not trained
                    else "a factor of 2 or more is needed (1 is the model's own RoPE)"
                ),
                field="rope_factor",
            )
        settings.update(n_ctx=trained * rope_factor, rope_scaling=rope_scaling)
        rope = {"rope_scaling": rope_scaling, "rope_factor": rope_factor}
    ident = {
        "method": METHOD_VERSION,
        "model_sha256": ref_m.sha256,
        "reference_sha256": ref_r.sha256 if ref_r else None,
        "text_sha256": txt.sha256,
        "n_ctx": n_ctx,
        "chunks": chunks,
        "backend_version": bversion,
        "host": host["id"],
        **rope,  # absent without scaling: the artifacts measured before keep their key
    }
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    root = root or perplexity_dir()
    job = {
        "model": ref_m.to_dict(),
        "reference": ref_r.to_dict() if ref_r else None,
        "text_path": str(txt.path),
        "n_ctx": n_ctx,
        "chunks": chunks,
        "settings": settings,
    }

    def build(outcome: runner.ChildOutcome) -> dict[str, Any]:
        return _document(
            outcome,
            key=key,
            txt=txt,
            ref_m=ref_m,
            ref_r=ref_r,
            n_ctx=n_ctx,
            chunks=chunks,
            settings=settings,
            host=host,
            bversion=bversion,
            rope=rope,
        )

    def path(doc: dict[str, Any]) -> Path:
        kind = f"kld-vs-{slug(ref_r.name)}" if ref_r else "ppl"
        return (
            root
            / host["id"]
            / slug(ref_m.name)
            / f"{kind}--{key[:16]}-{doc['id'].split('-', 1)[1]}.json"
        )

    # the same run loop as speed and quality runs (skip / resume / force, child process, atomic write)
    report = runner.execute(
        [
            runner.Scenario(
                key=key,
                root=root,
                module="runtime.quality.perplexity",
                job=job,
                timeout_s=timeout_s,
                label={"model": model, "reference": reference},
                build=build,
                path=path,
            )
        ],
        runner.MatrixReport("perplexity"),
        lambda kind, info: None,
        force=force,
    )
    if report.skipped:
        return report.skipped[-1], False
    return (report.measured or report.failed)[-1], True


def _document(
    outcome: Any,
    *,
    key: str,
    txt: Text,
    ref_m: Any,
    ref_r: Any,
    n_ctx: int,
    chunks: int | None,
    settings: dict[str, Any],
    host: dict[str, Any],
    bversion: str,
    rope: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The perplexity artifact from the child's outcome; ConfigError (nothing written) for bad input."""
    from core.records import perplexity as ppl_record
    from runtime import __version__
    from runtime.execution import runner

    res = outcome.result or {}
    err = res.get("error") or {}
    if (
        err.get("kind") == "input"
    ):  # bad input found by the child (text too short, other tokenizer)
        raise ConfigError(err["message"], file=relpath(txt.path))
    created = datetime.now(UTC)
    status = "ok" if res.get("status") == "ok" and outcome.exit_code == 0 else "failed"
    error = None
    if status == "failed":
        error = {
            "kind": "timeout"
            if outcome.timed_out
            else ("crash" if outcome.signal else err.get("kind", "error")),
            "message": err.get("message")
            or f"child exited with code {outcome.exit_code} ({outcome.signal})",
        }
    describe = res.get("describe") or {}

    def model_doc(r: Any) -> dict[str, Any]:
        return {
            "name": r.name,
            "file_name": Path(r.path).name,
            "sha256": r.sha256,
            "size_bytes": r.size_bytes,
            "source": r.source,
            "quantization": r.facts.get("quantization"),
            "vocab_size": r.facts.get("vocab_size"),
            "derived": r.facts.get("derived"),
        }

    return ppl_record.new_perplexity(
        key=key,
        created=created,
        status=status,
        error=error,
        model=model_doc(ref_m),
        reference=model_doc(ref_r) if ref_r else None,
        text={**txt.to_dict(), "n_tokens": res.get("n_tokens")},
        method={
            "version": METHOD_VERSION,
            "n_ctx": n_ctx,
            "n_chunk": res.get("n_chunk"),
            "chunks_requested": chunks,
            "scored_per_chunk": n_ctx - n_ctx // 2 - 1,
            "add_bos": res.get("add_bos"),
            "anchor": "llama.cpp llama-perplexity (--kl-divergence): second half of each n_ctx chunk scored, "
            "standard error of the mean",
            **(
                {
                    **rope,
                    "rope_window": "the context allocated at rope_factor times the trained one, RoPE "
                    "scaled to it; the text scored in chunks of n_ctx tokens",
                }
                if rope
                else {}
            ),
        },
        settings=settings,
        host=host,
        build={
            **(describe.get("build") or {"backend": BACKEND}),
            "backend_version": bversion,
            "almanac": __version__,
        },
        results=summarize(res["sums"]) if status == "ok" else None,
        chunks=res.get("chunks") or [],
        resources={
            "peak_rss_bytes": outcome.peak_rss_bytes,
            "wall_s": outcome.wall_s,
            "eval_s": res.get("eval_s"),
        },
        log_tail=runner.tail_log(outcome.log, 40),
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
