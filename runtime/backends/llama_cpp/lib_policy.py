"""Quirks of the llama.cpp library handled in one place, for every process that loads a model.

Extra buffer types and AMX. llama.cpp registers "extra" CPU buffer types for weights: the
runtime repack of Q4_0/IQ4_NL/... and, when compiled with AMX (``-march=native`` on an Intel
CPU with AMX), the AMX matmul. In the llama.cpp vendored by llama-cpp-python 0.3.36
(commit 0c1e57098) the AMX path crashes the process (SIGSEGV in ``ggml_backend_amx_mul_mat``)
on every decode of more than one token: prompt processing, chat prefill, speculative
verification. One-token decodes run. With ``use_extra_bufts = false`` (llama.cpp's
``--no-repack``) the same calls run, without the repack as well.

Policy (``$ALMANAC_EXTRA_BUFTS``: ``auto`` (default), ``on``, ``off``): ``auto`` turns extra
buffer types off exactly when the loaded library has AMX compiled in, and on otherwise (llama.cpp's
default). The policy and its reason are recorded in every artifact's effective settings, so a
result measured without repack never passes for one measured with it (they differ in the
comparability key).
"""

from __future__ import annotations

import os
import re
from typing import Any

ENV = "ALMANAC_EXTRA_BUFTS"
_state: dict[str, Any] = {}


def amx_compiled_in(system_info: str) -> bool:
    """Whether llama.cpp's system-info string reports the AMX matmul (``AMX_INT8 = 1``)."""
    return re.search(r"\bAMX_INT8\s*=\s*1\b", system_info) is not None


def decide(system_info: str, requested: str | None = None) -> dict[str, Any]:
    """``{"use_extra_bufts": bool, "policy": str, "reason": str}`` for a library's system info."""
    policy = (
        requested if requested is not None else os.environ.get(ENV, "auto")
    ).strip().lower() or "auto"
    if policy not in ("auto", "on", "off"):
        from core.errors import ConfigError

        raise ConfigError(
            f"must be auto, on or off, not {policy[:40]!r}",
            file="environment",
            field=ENV,
        )
    if policy == "on":
        return {"use_extra_bufts": True, "policy": policy, "reason": f"${ENV}=on"}
    if policy == "off":
        return {"use_extra_bufts": False, "policy": policy, "reason": f"${ENV}=off"}
    if amx_compiled_in(system_info):
        return {
            "use_extra_bufts": False,
            "policy": policy,
            "reason": "llama.cpp has AMX compiled in; its AMX matmul crashes on multi-token batches in this version",
        }
    return {"use_extra_bufts": True, "policy": policy, "reason": "llama.cpp default"}


def apply() -> dict[str, Any]:
    """Make every model this process loads follow the policy; idempotent. Returns the decision.

    llama-cpp-python builds a model's parameters from ``llama_model_default_params()``; the
    wrapper installed here sets ``use_extra_bufts`` on what it returns."""
    if _state:
        return dict(_state["decision"])
    import llama_cpp
    import llama_cpp.llama_cpp as low

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    decision = decide(info)
    original = low.llama_model_default_params

    def default_params():
        params = original()
        params.use_extra_bufts = decision["use_extra_bufts"]
        return params

    low.llama_model_default_params = default_params
    llama_cpp.llama_model_default_params = default_params
    _state["decision"] = decision
    return dict(decision)
