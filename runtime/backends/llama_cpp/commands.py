"""The command lines that reproduce a run of this backend outside the almanac.

llama.cpp's own tools and llama-cpp-python's ``Llama()``, from what the run asked for (its requested
settings, and its test for llama-bench). A flag at its default is left out: the defaults are the
backend's settings' own (``LlamaCppSettings``), which follow llama.cpp's tools. The site prints
these for the Optimization page's best points (docs/macros.py hands them to the page builder;
pipelines never import a backend).
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from core.kinds.rate import RateTest
from runtime.backends.llama_cpp.config import LlamaCppSettings

if TYPE_CHECKING:  # annotations only (the backend imports this module)
    from core.records.run import RunRecord

# settings -> llama-server's (and llama-bench's) flags
SERVER_FLAGS = (
    ("n_threads", "-t"),
    ("n_threads_batch", "-tb"),
    ("n_batch", "-b"),
    ("n_ubatch", "-ub"),
    ("n_ctx", "-c"),
    ("n_gpu_layers", "-ngl"),
    ("flash_attn", "-fa"),
    ("type_k", "-ctk"),
    ("type_v", "-ctv"),
)
BENCH_OMITS = (
    "n_ctx",
    "n_threads_batch",
)  # llama-bench sizes the context from the test
# settings passed to Llama() under their own names
PYTHON_ARGUMENTS = (
    "n_threads",
    "n_threads_batch",
    "n_batch",
    "n_ubatch",
    "n_ctx",
    "n_gpu_layers",
)
MODEL_PLACEHOLDER = "MODEL.gguf"  # a run without a local file's name


def _default(key: str) -> Any:
    return LlamaCppSettings.model_fields[key].default


def _flags(req: dict[str, Any], omit: tuple[str, ...] = ()) -> list[str]:
    """The flags of the settings asked for that are not at their default."""
    out: list[str] = []
    for key, flag in SERVER_FLAGS:
        v = req.get(key)
        if key in omit or v is None or _default(key) == v:
            continue
        out += [flag, str(v)]
    return out


def _kv_flag(key: str, value: Any) -> str:
    """One ``--override-kv`` value: ``key=type:value``."""
    if isinstance(value, bool):
        return f"{key}=bool:{str(value).lower()}"
    kind = (
        "int"
        if isinstance(value, int)
        else "float"
        if isinstance(value, float)
        else "str"
    )
    return f"{key}={kind}:{value}"


def _server(run: RunRecord, model_file: str) -> str:
    req = run.requested
    flags = ["-m", model_file, *_flags(req)]
    for k, v in sorted(run.kv_overrides.items()):
        flags += ["--override-kv", _kv_flag(k, v)]
    spec = req.get("speculative") or "none"
    if spec == "draft_model":
        draft = run.reported.get("draft_model_file") or f"{req.get('draft_model')}.gguf"
        flags += ["-md", draft, "--spec-draft-n-max", str(req.get("draft_max"))]
    elif spec == "prompt_lookup":
        flags += [
            "--spec-type",
            "ngram-simple",
            "--spec-ngram-simple-size-n",
            str(req.get("lookup_ngram_max")),
            "--spec-ngram-simple-size-m",
            str(req.get("draft_max")),
        ]
    return "llama-server " + " ".join(shlex.quote(f) for f in flags)


def _bench(test: RateTest, req: dict[str, Any], model_file: str) -> str:
    b = ["-m", model_file]
    if test.n_prompt:
        b += ["-p", str(test.n_prompt)]
    b += ["-n", str(test.n_gen or 0)]
    if test.n_depth:
        b += ["-d", str(test.n_depth)]
    if test.repetitions:
        b += ["-r", str(test.repetitions)]
    b += _flags(req, omit=BENCH_OMITS)
    return "llama-bench " + " ".join(shlex.quote(x) for x in b)


def _python(run: RunRecord, model_file: str) -> str:
    req = run.requested
    args = [f"model_path={model_file!r}"]
    for key in PYTHON_ARGUMENTS:
        if req.get(key) is not None and _default(key) != req.get(key):
            args.append(f"{key}={req[key]}")
    if req.get("flash_attn") == "on":
        args.append("flash_attn=True")
    for key in ("type_k", "type_v"):
        if req.get(key) and req[key] != _default(key):
            args.append(f"{key}=llama_cpp.GGML_TYPE_{req[key].upper()}")
    overrides = run.kv_overrides
    if overrides:
        args.append(f"kv_overrides={json.dumps(overrides, sort_keys=True)}")
    spec = req.get("speculative") or "none"
    if spec == "prompt_lookup":
        args.append(
            f"draft_model=LlamaPromptLookupDecoding(max_ngram_size={req.get('lookup_ngram_max')}, "
            f"num_pred_tokens={req.get('draft_max')})"
        )
    elif spec == "draft_model":
        draft = run.reported.get("draft_model_file") or f"{req.get('draft_model')}.gguf"
        args.append(
            f"draft_model=ModelDraft(Llama({draft!r}), num_pred_tokens={req.get('draft_max')})"
        )
    return "Llama(" + ", ".join(args) + ")"


def _notes(req: dict[str, Any]) -> str:
    notes = []
    if req.get("flash_attn", _default("flash_attn")) == "auto":
        notes.append(
            "flash attention 'auto' (llama.cpp's default) has no llama-cpp-python argument: its flash_attn is "
            "on/off; the almanac passes LLAMA_FLASH_ATTN_TYPE_AUTO"
        )
    spec = req.get("speculative") or "none"
    if spec == "draft_model":
        notes.append(
            "ModelDraft is runtime.backends.llama_cpp.speculative.ModelDraft, a LlamaDraftModel wrapping a second Llama"
        )
    if spec == "prompt_lookup":
        notes.append(
            "llama-server's ngram-simple matches n-grams of exactly N tokens; LlamaPromptLookupDecoding tries "
            "the longest match up to N first"
        )
    return "; ".join(notes)


def command_lines(run: RunRecord) -> dict[str, str]:
    """llama.cpp command lines and llama-cpp-python arguments that reproduce a run.

    ``server``: llama-server (this llama.cpp's flag names: ``--spec-draft-n-max`` replaced
    ``--draft-max``; prompt lookup's nearest equivalent is ``--spec-type ngram-simple``, which
    matches n-grams of exactly N tokens where llama-cpp-python tries the longest first).
    ``bench``: llama-bench, for rate tests (it has no --override-kv). ``python``: the Llama()
    arguments this almanac passed. ``notes``: where the three differ ("" when nowhere).
    """
    model_file = run.model_file_name or MODEL_PLACEHOLDER
    out = {"server": _server(run, model_file)}
    if isinstance(run.spec, RateTest):
        out["bench"] = _bench(run.spec, run.requested, model_file)
    out["notes"] = _notes(run.requested)
    out["python"] = _python(run, model_file)
    return out
