"""llama-cpp-python in process.

Rate tests bypass ``Llama.eval`` and drive llama.cpp's C API the way llama-bench does
(decode.py, the rate kind's primitive): token ids drawn before the timer, ``llama_decode`` of
n_batch-sized batches for pp, one-token decodes with a synchronise after each for tg, the KV
cache cleared before each repetition, depth prefilled outside the timer. The rate kind's loop
(core.kinds.rate.run_rate) times only those calls.

Chat tests go through ``Llama.create_chat_completion(stream=True)`` (chat_request.py, the chat
kind's primitive) so the model's template and sampler are what is measured; a logits
processor timestamps every sampling step and each request starts from an empty KV cache.
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import ConfigError, UserError
from core.kinds import chat as chat_kind
from core.kinds import rate as rate_kind
from core.kinds.base import TestSpec
from core.kinds.chat import ChatTest
from core.kinds.embed import EmbedTest
from core.kinds.generate import GenerateTest
from core.kinds.rate import RateTest
from core.kinds.serve import ServeTest
from runtime.backends import inprocess
from runtime.backends.base import Backend, Incompatible, TestResult, runs
from runtime.backends.llama_cpp import NAME, commands, decode, experts, speculative
from runtime.backends.llama_cpp import lib_policy as llamacpp_lib
from runtime.backends.llama_cpp.chat_request import chat_request
from runtime.backends.llama_cpp.config import LlamaCppSettings
from runtime.hosts import devices, placement
from runtime.hosts.energy import RateEnergy

# annotations only: a worker loading the backend never reads a run artifact
if TYPE_CHECKING:
    from core.records.run import RunRecord

# The llama.cpp commit vendored in each llama-cpp-python release (from its CHANGELOG,
# which the wheel does not ship). benchmarks/fidelity.py checks the pinned one.
VENDORED_LLAMA_CPP = {
    "0.3.36": "0c1e57098",
    "0.3.35": "4df29be4f",
    "0.3.34": "e3546c794",
    "0.3.33": "78d2f5246",
}


# ggml_type enum values (ggml.h); stable across releases.
GGML_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}


# ggml_log_level in this llama.cpp: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5.
# llama-cpp-python's own callback maps these with an older numbering (errors arrive as
# "debug" and are dropped, debug lines arrive as "info"), so the worker installs its own.
_LOG_MIN_LEVEL = 2
_log_state = {"last": 2, "callback": None}


def install_log_capture(min_level: int = _LOG_MIN_LEVEL) -> None:
    """Send llama.cpp's log (info, warnings, errors; not debug) to stderr, which the worker captures."""
    import sys

    import llama_cpp

    if _log_state["callback"] is not None:
        return

    @llama_cpp.llama_log_callback
    def _callback(level, text, user_data):
        level = _log_state["last"] if level == 5 else level
        _log_state["last"] = level
        if level >= min_level or level == 0:
            line = text.decode("utf-8", errors="replace")
            sys.stderr.write(line)
            _log_state["tail"] = (_log_state.get("tail", "") + line)[
                -4000:
            ]  # for a load failure's reason

    _log_state["callback"] = _callback  # keep a reference: ctypes must not free it
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


def _rss_bytes() -> int | None:
    import psutil

    try:
        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


# "<who>: <buffer> <kind> buffer size = <x> MiB" lines of llama.cpp's load log (llama.cpp's own
# accounting, shown beside the memory planner's prediction).
_BUFFER_RE = re.compile(
    r"^(load_tensors|llama_context|llama_kv_cache|sched_reserve):\s+(\S+)\s+(model|output|KV|compute) "
    r"buffer size =\s+([0-9.]+) MiB",
    re.M,
)


# "llama_adapter_lora_init_impl:        CPU LoRA buffer size =    X MiB", one per adapter (and buffer type).
_LORA_BUFFER_RE = re.compile(
    r"^llama_adapter_lora_init_impl:\s+\S+ LoRA buffer size =\s+([0-9.]+) MiB", re.M
)


def memory_from_log(log: str) -> dict[str, dict[str, float]]:
    """Buffers llama.cpp reported while loading the (first) model: {kind: {buffer: MiB}}.
    The log is cut after the first run of compute-buffer lines (one per device), so a draft
    model's buffers are left out."""
    # the first model's compute buffers: one line per device (a model split over GPUs has several)
    end = re.search(
        r"compute buffer size =.*$(\n.*compute buffer size =.*$)*", log, re.M
    )
    head = log[: end.end()] if end else log
    out: dict[str, dict[str, float]] = {}
    for m in _BUFFER_RE.finditer(head):
        kind = {"KV": "kv"}.get(m.group(3), m.group(3))
        out.setdefault(kind, {})
        out[kind][m.group(2)] = round(
            out[kind].get(m.group(2), 0.0) + float(m.group(4)), 4
        )
    return out


def resolve_extra_bufts(settings: LlamaCppSettings, policy: dict[str, Any]) -> bool:
    (
        """The setting when given; null: the process-wide policy """
        """(runtime.backends.llama_cpp.lib_policy: off where AMX is compiled in)."""
    )
    return (
        settings.extra_bufts
        if settings.extra_bufts is not None
        else bool(policy.get("use_extra_bufts", True))
    )


def _with_extra_bufts(default_params: Any, value: bool) -> Any:
    def params() -> Any:
        p = default_params()
        p.use_extra_bufts = value
        return p

    return params


def _with_seq_max(default_params: Any, n_seq_max: int) -> Any:
    """llama-cpp-python's constructor has no n_seq_max: its context defaults, with it set (the KV
    cache split among the sequences, kv_unified off: llama.cpp's own default)."""

    def params() -> Any:
        p = default_params()
        p.n_seq_max = n_seq_max
        p.kv_unified = False
        return p

    return params


def physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def resolve_threads(settings: LlamaCppSettings) -> tuple[int, int]:
    n = settings.n_threads or physical_cores()
    return n, settings.n_threads_batch or n


def effective_n_ctx(settings: LlamaCppSettings, test: TestSpec) -> int:
    """llama-bench sizes the context to the test; chat gets 4096 unless set."""
    if settings.n_ctx is not None:
        return settings.n_ctx
    if isinstance(test, RateTest):
        return (test.n_depth + test.n_prompt + test.n_gen) * test.n_seq
    return 4096


def rope_kwargs(
    settings: LlamaCppSettings, facts: dict[str, Any], n_ctx: int
) -> dict[str, Any]:
    """llama-cpp-python's arguments for ``rope_scaling``: the trained context stretched to n_ctx (factor
    n_ctx ÷ trained; llama.cpp --rope-scaling linear|yarn --rope-scale F --yarn-orig-ctx N)."""
    if settings.rope_scaling == "none":
        return {}
    import llama_cpp as L

    trained = int(facts.get("context_length") or 0)
    factor = n_ctx / trained
    kind = (
        L.LLAMA_ROPE_SCALING_TYPE_LINEAR
        if settings.rope_scaling == "linear"
        else L.LLAMA_ROPE_SCALING_TYPE_YARN
    )
    out: dict[str, Any] = {"rope_scaling_type": kind, "rope_freq_scale": 1.0 / factor}
    if settings.rope_scaling == "yarn":
        out["yarn_orig_ctx"] = trained
    return out


class LlamaCppBackend(Backend):
    name = NAME
    settings_class = LlamaCppSettings
    settings: LlamaCppSettings
    test_kinds = ("rate", "chat", "serve", "generate", "embed")
    in_process = True
    prompt_styles = ("chat", "completion", "loglikelihood")
    kind_notes = {"serve": inprocess.SERVE_NOTE}

    @classmethod
    def command_lines(cls, run: RunRecord) -> dict[str, str]:
        """llama-server, llama-bench and llama-cpp-python's command lines for a run (``commands``)."""
        return commands.command_lines(run)

    def __init__(self, model, settings: LlamaCppSettings):
        super().__init__(model, settings)
        self.llm = None
        self.n_ctx: int | None = None
        self.draft: Any = (
            None  # speculative decoding's draft (prompt lookup or a second Llama)
        )
        self.draft_facts: dict[str, Any] = {}
        self.lib_policy: dict[str, Any] = {}
        self.load_time_s: float | None = (
            None  # the last load's, the in-process serve's startup
        )
        self.lora_facts: dict[str, Any] = {}
        self.placement: placement.HostView | None = None

    # -- load ---------------------------------------------------------------------------
    def load(self, test: TestSpec | None = None) -> dict[str, Any]:
        import llama_cpp
        import llama_cpp.llama as llama_module

        s = self.settings
        install_log_capture()
        self.lib_policy = llamacpp_lib.apply()
        rss_before_model = (
            _rss_bytes()
        )  # the process with llama.cpp's libraries, before the model (memory planner)
        self.n_ctx = effective_n_ctx(s, test) if test is not None else (s.n_ctx or 4096)
        n_threads, n_threads_batch = resolve_threads(s)
        offload = bool(llama_cpp.llama_supports_gpu_offload())
        self.placement = placement.HostView.here()
        if not offload and s.n_gpu_layers != 0:
            asked = [
                k
                for k in ("split_mode", "tensor_split", "main_gpu")
                if not placement.is_default(s, k)
            ]
            if asked:
                raise ConfigError(
                    f"{asked[0]} {getattr(s, asked[0])!r}: this llama.cpp build has no GPU offload (a CPU-only build)",
                    field=asked[0],
                )
        if s.cpu_mask is not None:  # llama.cpp's threads inherit the process's affinity
            os.sched_setaffinity(0, devices.parse_cpu_mask(s.cpu_mask))
        kwargs = dict(
            model_path=self.model.path,
            n_gpu_layers=s.n_gpu_layers,
            main_gpu=s.main_gpu,
            split_mode={
                "none": llama_cpp.LLAMA_SPLIT_MODE_NONE,
                "layer": llama_cpp.LLAMA_SPLIT_MODE_LAYER,
                "row": llama_cpp.LLAMA_SPLIT_MODE_ROW,
                "tensor": llama_cpp.LLAMA_SPLIT_MODE_TENSOR,
            }[s.split_mode],
            tensor_split=s.tensor_split,
            numa={
                "off": llama_cpp.GGML_NUMA_STRATEGY_DISABLED,
                "distribute": llama_cpp.GGML_NUMA_STRATEGY_DISTRIBUTE,
                "isolate": llama_cpp.GGML_NUMA_STRATEGY_ISOLATE,
                "numactl": llama_cpp.GGML_NUMA_STRATEGY_NUMACTL,
            }[s.numa],
            use_mmap=s.use_mmap,
            use_mlock=s.use_mlock,
            kv_overrides=experts.kv_overrides(s, self.model.facts) or None,
            seed=s.seed,
            n_ctx=self.n_ctx,
            n_batch=s.n_batch,
            n_ubatch=s.n_ubatch,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            offload_kqv=s.offload_kqv,
            swa_full=s.swa_full,
            flash_attn=s.flash_attn != "off",
            type_k=GGML_TYPES[s.type_k],
            type_v=GGML_TYPES[s.type_v],
            chat_format=s.chat_format,
            **rope_kwargs(s, self.model.facts, self.n_ctx),
            **(
                {"embedding": True, "pooling_type": llama_cpp.LLAMA_POOLING_TYPE_MEAN}
                if s.embedding
                else {}
            ),
            logits_all=s.speculative
            != "none",  # a draft needs logits for every drafted position
            verbose=True,
        )
        # llama-cpp-python's constructor only knows flash_attn on/off; llama.cpp's default
        # is "auto". For "auto", the constant it maps True to is swapped for AUTO while the
        # constructor runs (single-threaded child process; restored at once).
        inner = llama_module.llama_cpp
        saved = inner.LLAMA_FLASH_ATTN_TYPE_ENABLED
        saved_params = inner.llama_model_default_params
        saved_ctx_params = inner.llama_context_default_params
        if s.n_seq_max > 1:
            inner.llama_context_default_params = _with_seq_max(
                saved_ctx_params, s.n_seq_max
            )
        if s.flash_attn == "auto":
            inner.LLAMA_FLASH_ATTN_TYPE_ENABLED = inner.LLAMA_FLASH_ATTN_TYPE_AUTO
        if (
            s.extra_bufts is not None
        ):  # an explicit setting over the process policy, for this constructor only
            inner.llama_model_default_params = _with_extra_bufts(
                saved_params, s.extra_bufts
            )
        t0 = time.perf_counter()
        try:
            self.llm = llama_cpp.Llama(**kwargs)
        except ValueError:
            m = re.search(
                r"device (\S+) does not support split buffers",
                str(_log_state.get("tail", "")),
            )
            if s.split_mode == "row" and m:
                raise Incompatible(
                    f"split_mode row: this llama.cpp build cannot split rows over its GPUs ({m.group(1)} does "
                    "not support split buffers: its CUDA backend no longer exports the row split); use split_mode "
                    "tensor (its successor) or layer"
                ) from None
            raise
        finally:
            inner.LLAMA_FLASH_ATTN_TYPE_ENABLED = saved
            inner.llama_model_default_params = saved_params
            inner.llama_context_default_params = saved_ctx_params
        load_time = time.perf_counter() - t0
        self.load_time_s = load_time
        if (
            s.lora_adapters
        ):  # timed on their own (lora.load_time_s), not part of the model's load time
            self._attach_adapters()
        if (
            s.speculative != "none"
        ):  # after the target, so the log's first facts are the target's
            self._load_draft(kwargs)
        return {
            "load_time_s": load_time,
            "effective_settings": self._effective(n_threads, n_threads_batch),
            "rss_before_model_bytes": rss_before_model,
        }

    def _attach_adapters(self) -> None:
        """Load every LoRA adapter of the settings and attach them all to the context.

        Each adapter is checked against the model first (architecture, tensors, shapes: one
        line naming both when it does not fit, a failed point of kind "incompatible"); what
        attaching cost is recorded: each adapter's load time and the process's RSS growth."""
        import llama_cpp as L

        from runtime.models import lora as lora_mod
        from runtime.models.registry import resolve_adapter

        s = self.settings
        refs = [resolve_adapter(name) for name in s.lora_adapters]
        for ref in refs:
            reason = lora_mod.mismatch(
                ref.name, ref.facts, self.model.name, Path(self.model.path)
            )
            if reason:
                raise Incompatible(reason)
        rss0 = _rss_bytes()
        loaded, times = [], []
        for ref in refs:
            t0 = time.perf_counter()
            ptr = L.llama_adapter_lora_init(self.llm._model.model, ref.path.encode())
            times.append(time.perf_counter() - t0)
            if not ptr:
                raise Incompatible(
                    f"llama.cpp refused LoRA adapter {ref.name!r} for model {self.model.name!r} "
                    "(llama_adapter_lora_init returned NULL; its reason is in the log)"
                )
            loaded.append(ptr)
        n = len(loaded)
        t0 = time.perf_counter()
        arr = (L.llama_adapter_lora_p_ctypes * n)(*loaded)
        scales = (ctypes.c_float * n)(*([s.lora_scale] * n))
        rc = L.llama_set_adapters_lora(self.llm._ctx.ctx, arr, n, scales)
        set_s = time.perf_counter() - t0
        if rc != 0:
            raise RuntimeError(f"llama_set_adapters_lora returned {rc}")
        rss1 = _rss_bytes()
        self.lora_facts = {
            "lora": {
                "adapters": [
                    {**ref.summary(), "load_time_s": dt} for ref, dt in zip(refs, times)
                ],
                "count": n,
                "scale": s.lora_scale,
                "load_time_s": sum(times) + set_s,
                "attach_time_s": set_s,
                "rss_growth_bytes": (rss1 - rss0)
                if rss0 is not None and rss1 is not None
                else None,
                "method": "llama_adapter_lora_init per adapter, then llama_set_adapters_lora with all of them "
                "(llama.cpp --lora); RSS growth = resident set after attaching - before",
            }
        }

    def _load_draft(self, kwargs: dict[str, Any]) -> None:
        """Build the draft (raises Incompatible with the reason) and hand it to the target."""
        import llama_cpp.llama as llama_module

        s = self.settings
        ref = None
        if s.speculative == "draft_model":
            from runtime.models.registry import resolve

            ref = resolve(s.draft_model)
        inner = llama_module.llama_cpp
        saved = inner.LLAMA_FLASH_ATTN_TYPE_ENABLED
        saved_params = inner.llama_model_default_params
        if s.flash_attn == "auto":
            inner.LLAMA_FLASH_ATTN_TYPE_ENABLED = inner.LLAMA_FLASH_ATTN_TYPE_AUTO
        if s.extra_bufts is not None:
            inner.llama_model_default_params = _with_extra_bufts(
                saved_params, s.extra_bufts
            )
        try:
            self.draft, self.draft_facts = speculative.make_draft(
                s, self.llm, self.model.facts, ref, kwargs
            )
        finally:
            inner.LLAMA_FLASH_ATTN_TYPE_ENABLED = saved
            inner.llama_model_default_params = saved_params
        self.llm.draft_model = self.draft

    def _effective(self, n_threads: int, n_threads_batch: int) -> dict[str, Any]:
        import llama_cpp

        s = self.settings
        ctx = self.llm._ctx.ctx
        cp = self.llm.context_params
        fa_names = {
            int(llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO): "auto",
            int(llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED): "on",
            int(llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED): "off",
        }
        return {
            "n_ctx": int(llama_cpp.llama_n_ctx(ctx)),
            "n_batch": int(llama_cpp.llama_n_batch(ctx)),
            "n_ubatch": int(llama_cpp.llama_n_ubatch(ctx)),
            "n_threads": int(llama_cpp.llama_n_threads(ctx)),
            "n_threads_batch": int(llama_cpp.llama_n_threads_batch(ctx)),
            "n_seq_max": int(cp.n_seq_max),
            "flash_attn_requested": fa_names.get(
                int(cp.flash_attn_type), str(cp.flash_attn_type)
            ),
            "type_k": s.type_k,
            "type_v": s.type_v,
            "offload_kqv": bool(cp.offload_kqv),
            "swa_full": bool(cp.swa_full),
            "n_gpu_layers_requested": s.n_gpu_layers,
            **placement.effective(s, self.placement, offload=self._offloads()),
            "cpu_mask_method": "process affinity (sched_setaffinity), inherited by llama.cpp's threads"
            if s.cpu_mask is not None
            else None,
            "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
            "use_mmap": s.use_mmap,
            "use_mlock": s.use_mlock,
            "seed": s.seed,
            "kv_overrides": experts.kv_overrides(s, self.model.facts),
            "chat_format": self.llm.chat_format,
            "logits_all": s.speculative != "none",
            "use_extra_bufts": resolve_extra_bufts(s, self.lib_policy),
            "use_extra_bufts_reason": (
                "setting extra_bufts"
                if s.extra_bufts is not None
                else self.lib_policy["reason"]
            ),
            **self.draft_facts,
            **self.lora_facts,
        }

    @staticmethod
    def log_facts(log: str) -> dict[str, Any]:
        """What llama.cpp decided, read from its log: flash attention, offloaded layers, MoE experts."""
        facts: dict[str, Any] = {}
        m = re.search(r"llama_context: flash_attn\s*=\s*(\w+)", log)
        if m:
            facts["flash_attn"] = {"enabled": "on", "disabled": "off"}.get(
                m.group(1), m.group(1)
            )
        m = re.search(r"Flash Attention (enabled|disabled)", log)
        if m:  # what "auto" resolved to
            facts["flash_attn"] = "on" if m.group(1) == "enabled" else "off"
        m = re.search(r"offloaded (\d+)/(\d+) layers to GPU", log)
        facts["n_gpu_layers"] = int(m.group(1)) if m else 0
        if m:
            facts["n_layers_total"] = int(m.group(2))
        m = re.search(r"n_expert_used\s*=\s*(\d+)", log)
        if m:
            facts["n_expert_used"] = int(m.group(1))
        memory = memory_from_log(log)
        if memory:
            facts["llama_memory_mib"] = memory
        lora = [float(x) for x in _LORA_BUFFER_RE.findall(log)]
        if lora:  # one line per adapter and buffer: llama.cpp's own accounting of the adapters' tensors
            facts["lora_buffer_mib"] = lora
        return facts

    # -- run: the dispatch table (Backend.run calls the method marked for the test's kind) ----
    @runs("chat")
    def _run_chat_test(self, test: ChatTest) -> TestResult:
        res = self._run_chat(test)
        stats = getattr(self.draft, "stats", None)
        if (
            stats is not None
        ):  # drafted / accepted over the whole test (warm-up included)
            res.details["speculative"] = {
                **stats.snapshot(),
                "acceptance": stats.accepted / stats.proposed
                if stats.proposed
                else None,
            }
        return res

    @runs("generate")
    def _run_generate(self, test: GenerateTest) -> TestResult:
        return speculative.run_generate(self.llm, self.draft, test)

    @runs("serve")
    def _run_serve(self, test: ServeTest) -> TestResult:
        return inprocess.run_serve(test, self._run_chat, self.load_time_s)

    @classmethod
    def context_tokens(cls, settings: LlamaCppSettings, test: TestSpec) -> int | None:
        return effective_n_ctx(settings, test)

    def _offloads(self) -> bool:
        import llama_cpp

        return self.settings.n_gpu_layers != 0 and bool(
            llama_cpp.llama_supports_gpu_offload()
        )

    def gpus_used(self) -> list[int] | None:
        """The visible GPUs this configuration occupies (its placement), None before load."""
        if self.llm is None:
            return None
        return placement.gpus_used(self.settings, self.placement.gpus, self._offloads())

    @classmethod
    def cannot_honour(
        cls, settings: LlamaCppSettings, model: Any, test: TestSpec
    ) -> tuple[str, str] | None:
        """RoPE scaling stretches the trained context to n_ctx: a context within the trained one (or a model
        that does not say what it was trained for) leaves no factor to apply. Speculation verifies K drafted
        tokens in one batch after the generated ones: a context without room for ``max_tokens + K + 1``
        tokens cannot take that K. Parallel sequences share n_ctx: a test of more sequences than the
        context holds, or whose sequences do not fit their share of it, has no room."""
        spec = cls._speculation_room(settings, test)
        if spec is not None:
            return spec
        if isinstance(test, EmbedTest) != settings.embedding:
            return (
                f"embedding={'true' if settings.embedding else 'false'}",
                f"test {test.name!r} "
                + (
                    "embeds a corpus: the context must be in embedding mode (embedding: true)"
                    if isinstance(test, EmbedTest)
                    else "generates: a context in embedding mode has no logits to decode from"
                ),
            )
        if isinstance(test, RateTest) and test.n_seq > 1:
            room = effective_n_ctx(settings, test) // settings.n_seq_max
            need = test.n_depth + test.n_gen
            if settings.n_seq_max < test.n_seq:
                return (
                    f"n_seq_max={settings.n_seq_max}",
                    f"test {test.name!r} decodes {test.n_seq} sequences at once; the context holds "
                    f"{settings.n_seq_max}",
                )
            if room < need:
                return (
                    f"n_seq_max={settings.n_seq_max}",
                    f"{settings.n_seq_max} sequences share n_ctx {effective_n_ctx(settings, test):,}: "
                    f"{room:,} tokens each, fewer than the {need:,} test {test.name!r} puts in each",
                )
        if settings.rope_scaling == "none":
            return None
        trained = int((getattr(model, "facts", None) or {}).get("context_length") or 0)
        n_ctx = effective_n_ctx(settings, test)
        if not trained:
            return (
                f"rope_scaling={settings.rope_scaling}",
                "the model does not state its trained context",
            )
        if n_ctx <= trained:
            return (
                f"rope_scaling={settings.rope_scaling}",
                f"n_ctx {n_ctx:,} is within the model's trained context of {trained:,} tokens: no factor to apply",
            )
        return None

    @staticmethod
    def _speculation_room(
        settings: LlamaCppSettings, test: TestSpec
    ) -> tuple[str, str] | None:
        if settings.speculative == "none" or not isinstance(
            test, (GenerateTest, ChatTest)
        ):
            return None
        n_ctx = effective_n_ctx(settings, test)
        max_tokens = int(getattr(test, "max_tokens", 0) or 0)
        need = max_tokens + settings.draft_max + 1
        if need <= n_ctx:
            return None
        return (
            f"draft_max={settings.draft_max}",
            f"n_ctx {n_ctx:,} has no room for {max_tokens:,} generated tokens plus {settings.draft_max:,} drafted "
            f"ones verified in one batch ({need:,} tokens before the prompt)",
        )

    @classmethod
    def preflight(cls, settings: LlamaCppSettings, model: Any, test: TestSpec) -> None:
        """Refuse before anything runs what llama.cpp would abort on or cannot do."""
        experts.check(settings, model.facts, model.name)
        for key in ("cpu_strict", "prio", "poll"):
            if not placement.is_default(settings, key):
                raise ConfigError(
                    f"{key} {getattr(settings, key)!r}: llama-cpp-python attaches no thread pool of its own, so "
                    "in process only the default applies; measure it with llama-bench or llama-server",
                    field=key,
                )
        placement.check(
            settings, placement.HostView.here(), offload=settings.n_gpu_layers != 0
        )
        if settings.speculative != "none":
            if not isinstance(test, (GenerateTest, ChatTest)):
                raise ConfigError(
                    f"{settings.speculative} speculative decoding applies to generate and chat tests, "
                    f"not to the {test.kind} test {test.name!r}: give that test a sweep of its own",
                    field="speculative",
                )
            if settings.speculative == "draft_model":
                from runtime.models.registry import resolve

                try:  # unknown names and missing files are refused now; a synthetic draft is generated now
                    resolve(settings.draft_model)
                except UserError as exc:
                    raise ConfigError(str(exc), field="draft_model") from None
        if settings.lora_adapters:
            from runtime.models.registry import resolve_adapter

            for i, name in enumerate(
                settings.lora_adapters
            ):  # unknown names refused now; synthetic ones written now
                try:
                    resolve_adapter(name)
                except UserError as exc:
                    raise ConfigError(str(exc), field=f"lora_adapters.{i}") from None
        if isinstance(test, RateTest) and settings.n_ctx is not None:
            need = test.n_depth + test.n_prompt + test.n_gen
            if settings.n_ctx < need:
                raise ConfigError(
                    f"n_ctx {settings.n_ctx} is smaller than the {need} tokens test {test.name!r} "
                    "puts in the context",
                    field="n_ctx",
                )

    @runs("embed")
    def _run_embed(self, test: EmbedTest) -> TestResult:
        from runtime.backends.llama_cpp import embedding

        return embedding.run(self.llm, test)

    @runs("rate")
    def _run_rate(self, test: RateTest) -> TestResult:
        n_threads, n_threads_batch = resolve_threads(self.settings)
        capi = decode.rate_work(
            self.llm, test, self.settings.seed, n_threads, n_threads_batch
        )
        n_seq, n_tokens = test.n_seq, capi.work.tokens
        # the kind's loop (core.kinds.rate.run_rate) over this backend's primitive: one repetition's
        # prompt batches and decode steps through the C API, prepared outside the timer
        run = rate_kind.run_rate(
            test,
            capi.work,
            # the device's energy counter, read immediately around each timed region
            lambda: RateEnergy.for_test(
                test, on_gpu=self._offloads(), gpus=self.gpus_used()
            ),
        )
        capi.free()
        perf = run.counters
        # llama.cpp's own counters, per repetition: its view of the same work.
        llama_ts = []
        for p in perf:
            ms = (p["t_p_eval_ms"] if test.n_prompt else 0.0) + (
                p["t_eval_ms"] if test.n_gen else 0.0
            )
            llama_ts.append(n_tokens * 1000.0 / ms if ms > 0 else None)
        return TestResult(
            metrics=run.metrics,
            samples=run.samples,
            details={
                "perf_counters": perf,
                "perf_counter_ts": llama_ts,
                "n_vocab": capi.n_vocab,
                "add_bos": capi.add_bos,
                "repetitions": len(run.samples_ns),
                "warmup": run.warmup,
                "precision": run.precision,
                "method": "llama-bench: C API decode loop, random tokens"
                + (
                    f"; {n_seq} sequences decoded together (one token of each per step, "
                    "llama-batched-bench's S_TG), each with its own depth"
                    if n_seq > 1
                    else ""
                ),
                **(
                    {
                        "depth_fill": "prefilled once, then restored from the saved sequence state "
                        "before each repetition (llama-bench's method)",
                        "depth_prefills": capi.depth_state["prefilled"],
                        "depth_restores": capi.depth_state["restored"],
                    }
                    if test.n_depth
                    else {}
                ),
                "energy": run.energy.details(),
            },
        )

    def _run_chat(self, test: ChatTest) -> TestResult:
        request = chat_request(self.llm, test)
        # the kind's loop (core.kinds.chat.run_requests) over this backend's one primitive, request(seed)
        run = chat_kind.run_requests(test, request, self.settings.seed)
        return TestResult(
            metrics=run.metrics,
            samples={"requests": run.records},
            details={
                "warmup_requests": run.warmup,
                "prefix_cache": False,
                "precision": run.precision,
                "method": "create_chat_completion(stream=True); sampler steps timestamped",
            },
        )

    # -- quality prompt styles ------------------------------------------------------------
    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int,
        stop: list[str],
        temperature: float = 0.0,
        seed: int = 0,
    ) -> dict[str, Any]:
        llm = self.llm
        llm.reset()
        t0 = time.perf_counter()
        out = llm.create_completion(
            prompt,
            max_tokens=max_tokens,
            stop=stop or None,
            temperature=temperature,
            seed=seed,
        )
        e2e = (time.perf_counter() - t0) * 1000.0
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        return {
            "text": choice["text"],
            "prompt_tokens": usage.get("prompt_tokens"),
            "output_tokens": usage.get("completion_tokens"),
            "e2e_ms": e2e,
            "finish_reason": choice.get("finish_reason"),
        }

    def loglikelihood(
        self, context: str, continuations: list[str]
    ) -> list[dict[str, Any]]:
        from runtime.backends.llama_cpp.logprobs import continuation_logprob

        return [continuation_logprob(self.llm, context, c) for c in continuations]

    # -- describe -------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        import llama_cpp as L

        version = importlib_metadata.version("llama-cpp-python")
        build = {
            "backend": self.name,
            "llama_cpp_python": version,
            "llama_cpp_commit": VENDORED_LLAMA_CPP.get(version, "unknown"),
            "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
            "gpu_offload_supported": bool(L.llama_supports_gpu_offload()),
            # where the shared libraries came from: the installed wheel, or a build of the same
            # llama.cpp commit loaded through LLAMA_CPP_LIB_PATH (e.g. a CUDA build on a GPU host)
            "libraries": "LLAMA_CPP_LIB_PATH"
            if os.environ.get("LLAMA_CPP_LIB_PATH")
            else "package",
        }
        model: dict[str, Any] = {}
        if self.llm is not None:
            m = self.llm._model
            model = {
                "desc": m.desc(),
                "size_bytes": int(m.size()),
                "n_params": int(m.n_params()),
                "metadata": {
                    k: v for k, v in self.llm.metadata.items() if len(v) < 512
                },
            }
        return {"build": build, "model": model}

    def close(self) -> None:
        if self.draft is not None and hasattr(self.draft, "close"):
            self.draft.close()
        self.draft = None
        if self.llm is not None:
            self.llm.close()
            self.llm = None
