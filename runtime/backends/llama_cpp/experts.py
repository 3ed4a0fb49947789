"""MoE expert reduction: the ``<architecture>.expert_used_count`` override, resolved and checked.

llama.cpp reads the number of experts routed per token from the GGUF key
``<arch>.expert_used_count``; ``kv_overrides`` (llama.cpp ``--override-kv``) replaces it at
load. An override of 0 or above ``<arch>.expert_count`` makes llama.cpp abort the process
(``GGML_ASSERT(n_expert_used_max > 0)`` / ``<= hparams.n_expert``), so every override is
checked against the file's own metadata before anything runs and refused with the reason.

What reached llama.cpp is confirmed afterwards from its log (``n_expert_used = N``, parsed
into the artifact's effective settings by the backend's ``log_facts``).
"""

from __future__ import annotations

from typing import Any

from core.errors import ConfigError

SUFFIX = "expert_used_count"


def override_key(architecture: str) -> str:
    return f"{architecture}.{SUFFIX}"


def kv_overrides(settings: Any, facts: dict[str, Any]) -> dict[str, Any]:
    """The kv_overrides passed to llama.cpp: the explicit ones plus ``n_expert_used``."""
    out = dict(settings.kv_overrides)
    if settings.n_expert_used is not None and facts.get("architecture"):
        out[override_key(facts["architecture"])] = int(settings.n_expert_used)
    return out


def requested_experts(settings: Any, facts: dict[str, Any]) -> int | None:
    """Experts per token this configuration asks for (None: the model's own)."""
    value = kv_overrides(settings, facts).get(
        override_key(facts.get("architecture") or "")
    )
    return None if value is None else int(value)


def check(settings: Any, facts: dict[str, Any], model_name: str) -> None:
    """Refuse an expert-count override that llama.cpp would abort on, naming the field."""
    arch = facts.get("architecture") or "?"
    n_expert = facts.get("expert_count") or 0
    what = f"model {model_name!r} ({arch}"
    what += (
        f", {n_expert} experts, {facts.get('expert_used_count')} used by default)"
        if n_expert
        else ")"
    )
    for key, value in settings.kv_overrides.items():
        if not key.endswith("." + SUFFIX):
            continue
        field = f"kv_overrides.{key}"
        if key != override_key(arch):
            raise ConfigError(
                f"{key} does not apply to {what}: its key is {override_key(arch)}",
                field=field,
            )
        _check_value(value, n_expert, what, field)
    if settings.n_expert_used is not None:
        _check_value(settings.n_expert_used, n_expert, what, "n_expert_used")


def _check_value(value: Any, n_expert: int, what: str, field: str) -> None:
    if not n_expert:
        raise ConfigError(
            f"{what} is not a mixture-of-experts model (no expert_count in its GGUF): "
            "expert reduction does not apply",
            field=field,
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"must be an integer number of experts, got {value!r}", field=field
        )
    if value < 1 or value > n_expert:
        raise ConfigError(
            f"{value} experts per token is outside 1..{n_expert} for {what}: llama.cpp would abort "
            f"(GGML_ASSERT on n_expert_used)",
            field=field,
        )
