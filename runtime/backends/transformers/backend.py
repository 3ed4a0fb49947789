"""Hugging Face transformers on PyTorch, in process, on the same GGUF file llama.cpp runs.

Loading: ``AutoTokenizer`` and ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)``:
transformers reads the GGUF with the ``gguf`` package, rebuilds the model's config and
tokenizer from its metadata and dequantizes every tensor to ``dtype`` (the weights in memory
are not quantized any more). The load time covers that and the move to the device; importing
torch and transformers is timed apart (``details.import_s``).

* **rate** follows llama-bench as the llama.cpp backend does: random token ids drawn before
  the timer, the prompt in one forward pass (only the last position's logits computed,
  ``logits_to_keep=1``, as llama.cpp's batch asks for), then one-token forward passes with the
  KV cache (``DynamicCache``), synchronised after each; the cache emptied before each
  repetition, the depth prefilled outside the timer; one whole untimed repetition as the
  warm-up (PyTorch meets each new KV length once; a single token is not enough). The device's energy
  counter is read around each timed region (runtime.hosts.energy).
* **chat**: the model's chat template (``apply_chat_template``) and ``generate`` with a
  streamer that timestamps every sampled token (the first one whose text is not empty is the
  TTFT); greedy at temperature 0, else sampling with the test's temperature, top-k, top-p,
  min-p and repetition penalty; a fresh cache per request (no prefix reuse).
* **serve**: in process (runtime.backends.inprocess): the load in this fresh process is the
  startup, the first request the cold one, then warm requests as ``chat`` sends them.
"""

from __future__ import annotations

import importlib.util
import random
import time
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.kinds import chat as chat_kind
from core.kinds import rate as rate_kind
from core.kinds.base import TestSpec
from core.kinds.chat import ChatTest
from core.kinds.rate import RateTest
from core.kinds.serve import ServeTest
from runtime.backends import inprocess
from runtime.backends.base import Backend, TestResult, UnsupportedTest, runs
from runtime.backends.transformers.config import TransformersSettings
from runtime.hosts.energy import RateEnergy

REQUIRED = (
    "torch",
    "transformers",
    "accelerate",
    "gguf",
)  # importable modules the backend needs
INSTALL_HINT = "pip install -e '.[transformers]'"


def missing_packages() -> list[str]:
    """The modules of REQUIRED that cannot be imported here (without importing them)."""
    return [m for m in REQUIRED if importlib.util.find_spec(m) is None]


def _rss_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def _physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


class TransformersBackend(Backend):
    name = "transformers"
    settings_class = TransformersSettings
    settings: TransformersSettings
    test_kinds = ("rate", "chat", "serve")
    in_process = True
    kind_notes = {
        "serve": inprocess.SERVE_NOTE,
        "rate": "the prompt in one forward pass (last position's logits only), then one-token forward passes with "
        "a DynamicCache, synchronised after each; weights dequantized from the GGUF",
    }

    def __init__(self, model, settings: TransformersSettings):
        super().__init__(model, settings)
        self.torch: Any = None
        self.tok: Any = None
        self.lm: Any = None
        self.device: str | None = None
        self.dtype_name: str | None = None
        self.import_s: float | None = None
        self.load_time_s: float | None = None

    # -- load ---------------------------------------------------------------------------
    @classmethod
    def preflight(
        cls, settings: TransformersSettings, model: Any, test: TestSpec
    ) -> None:
        missing = missing_packages()
        if missing:
            raise ConfigError(
                f"backend transformers needs {', '.join(REQUIRED)}; not installed here: "
                f"{', '.join(missing)} ({INSTALL_HINT})",
                field="backend",
            )
        if not str(getattr(model, "path", "")).endswith(".gguf"):
            raise ConfigError(
                f"backend transformers reads GGUF files; model {model.name!r} is not one",
                field="models",
            )

    def load(self, test: TestSpec | None = None) -> dict[str, Any]:
        t_imp = time.perf_counter()
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.import_s = time.perf_counter() - t_imp
        self.torch = torch
        s = self.settings
        if s.device == "cuda" and not torch.cuda.is_available():
            raise UnsupportedTest(
                "device 'cuda' asked for, but torch sees no CUDA GPU "
                f"(torch {torch.__version__}, CUDA {torch.version.cuda})"
            )
        self.device = (
            "cuda"
            if s.device == "cuda" or (s.device == "auto" and torch.cuda.is_available())
            else "cpu"
        )
        self.dtype_name = (
            s.dtype
            if s.dtype != "auto"
            else ("bfloat16" if self.device == "cuda" else "float32")
        )
        if self.device == "cpu":
            torch.set_num_threads(s.n_threads or _physical_cores())
        torch.manual_seed(s.seed)
        rss_before = _rss_bytes()
        path = Path(self.model.path)
        arch = (self.model.facts or {}).get("architecture")
        t0 = time.perf_counter()
        try:
            self.tok = AutoTokenizer.from_pretrained(
                str(path.parent), gguf_file=path.name, local_files_only=True
            )
            self.lm = AutoModelForCausalLM.from_pretrained(
                str(path.parent),
                gguf_file=path.name,
                local_files_only=True,
                dtype=getattr(torch, self.dtype_name),
                attn_implementation=s.attn_implementation,
                device_map={"": self.device},
            )
        except ValueError as exc:
            if "not supported" in str(exc):
                raise UnsupportedTest(
                    f"transformers {transformers.__version__} cannot load GGUF architecture "
                    f"{arch!r}: {exc}"
                ) from None
            raise
        self.lm.eval()
        self._sync()
        self.load_time_s = time.perf_counter() - t0
        return {
            "load_time_s": self.load_time_s,
            "effective_settings": self._effective(),
            "rss_before_model_bytes": rss_before,
        }

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _effective(self) -> dict[str, Any]:
        torch, s = self.torch, self.settings
        quant = (self.model.facts or {}).get("quantization")
        out = {
            "device": self.device,
            "dtype": self.dtype_name,
            "attn_implementation": getattr(
                self.lm.config, "_attn_implementation", s.attn_implementation
            ),
            "n_threads": int(torch.get_num_threads()),
            "seed": s.seed,
            "weights": f"dequantized from {quant or 'the GGUF'} to {self.dtype_name}",
        }
        if self.device == "cuda":
            out["device_name"] = torch.cuda.get_device_name(0)
        return out

    # -- run ------------------------------------------------------------------------------
    def run(self, test: TestSpec) -> TestResult:
        """Every kind runs in inference mode (the dispatch table picks the method), with torch's facts recorded."""
        with self.torch.inference_mode():
            res = super().run(test)
        res.details["import_s"] = self.import_s
        if self.device == "cuda":
            res.details["torch_max_allocated_bytes"] = int(
                self.torch.cuda.max_memory_allocated()
            )
        return res

    @runs("serve")
    def _run_serve(self, test: ServeTest) -> TestResult:
        return inprocess.run_serve(test, self._run_chat, self.load_time_s)

    def _forward(self, ids: Any, cache: Any) -> Any:
        return self.lm(
            input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1
        )

    @runs("rate")
    def _run_rate(self, test: RateTest) -> TestResult:
        from transformers import DynamicCache

        torch, lm = self.torch, self.lm
        n_vocab = int(lm.config.vocab_size)
        bos = self.tok.bos_token_id
        add_bos = bos is not None and bool(getattr(self.tok, "add_bos_token", True))
        rng = random.Random(self.settings.seed)

        def ids(n: int, first_bos: bool) -> Any:
            vals = [rng.randrange(n_vocab) for _ in range(n)]
            if first_bos and add_bos and n:
                vals[0] = bos
            return torch.tensor([vals], dtype=torch.long, device=self.device)

        def new_cache() -> Any:
            return DynamicCache(config=lm.config)

        def decode_gen(cache: Any, tg: Any) -> None:
            for i in range(tg.shape[1]):
                self._forward(tg[:, i : i + 1], cache)
                self._sync()

        def prepare() -> tuple[Any, Any, Any]:
            """Untimed: an empty cache, the depth prefilled, this repetition's token ids on the device."""
            cache = new_cache()
            if test.n_depth:
                self._forward(ids(test.n_depth, True), cache)
            pp = ids(test.n_prompt, not test.n_depth) if test.n_prompt else None
            tg = (
                ids(test.n_gen, not (test.n_depth or test.n_prompt))
                if test.n_gen
                else None
            )
            self._sync()
            return cache, pp, tg

        def work(cache: Any, pp: Any, tg: Any) -> None:
            if pp is not None:
                self._forward(pp, cache)
                self._sync()
            if tg is not None:
                decode_gen(cache, tg)

        # the kind's loop (core.kinds.rate.run_rate) over this backend's primitive: one repetition's
        # forward passes, prepared outside the timer; its warm-up is one whole untimed repetition, not
        # llama-bench's single token: PyTorch's caching allocator and kernel selection meet every new KV
        # length once (on the lent H200 the first tg128 repetition after a one-token warm-up took 7.4 s,
        # the next ten 1.3-1.7 s)
        run = rate_kind.run_rate(
            test,
            rate_kind.RateWork(
                tokens=test.n_prompt + test.n_gen,
                prepare=prepare,
                decode=lambda prepared: work(*prepared),
                warmup=lambda: work(*prepare()),
            ),
            lambda: RateEnergy.for_test(test, on_gpu=self.device == "cuda"),
        )
        return TestResult(
            metrics=run.metrics,
            samples=run.samples,
            details={
                "n_vocab": n_vocab,
                "add_bos": add_bos,
                "repetitions": len(run.samples_ns),
                "warmup": run.warmup,
                "precision": run.precision,
                "energy": run.energy.details(),
                "method": "llama-bench's method on transformers: random token ids, the prompt in one forward "
                "pass (logits_to_keep=1), one-token forward passes with a DynamicCache, synchronised",
            },
        )

    @runs("chat")
    def _run_chat(self, test: ChatTest) -> TestResult:
        from transformers.generation.streamers import BaseStreamer

        torch, tok, lm = self.torch, self.tok, self.lm
        eos = (
            tok.eos_token_id if tok.eos_token_id is not None else lm.config.eos_token_id
        )

        class Stamp(BaseStreamer):
            """Timestamps every sampled token (generate puts the prompt first, then each new token on the host)."""

            def __init__(self) -> None:
                self.prompt_seen = False
                self.steps: list[int] = []
                self.tokens: list[int] = []
                self.first: int | None = None
                self.last: int | None = None
                self.text = ""

            def put(self, value: Any) -> None:
                now = time.perf_counter_ns()
                if not self.prompt_seen:
                    self.prompt_seen = True
                    return
                self.steps.append(now)
                self.tokens.extend(int(v) for v in value.reshape(-1).tolist())
                text = tok.decode(self.tokens, skip_special_tokens=True)
                if len(text) > len(self.text):  # this token carried content
                    if self.first is None:
                        self.first = now
                    self.last = now
                self.text = text

            def end(self) -> None:
                pass

        def request(seed: int) -> dict[str, Any]:
            torch.manual_seed(seed)
            stamp = Stamp()
            kwargs: dict[str, Any] = {
                "max_new_tokens": test.max_tokens,
                "streamer": stamp,
                "pad_token_id": eos,
            }
            if test.temperature > 0:
                kwargs.update(
                    do_sample=True,
                    temperature=test.temperature,
                    top_k=test.top_k,
                    top_p=test.top_p,
                    min_p=test.min_p,
                )
            else:
                kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
            if test.repeat_penalty != 1.0:
                kwargs["repetition_penalty"] = test.repeat_penalty
            if test.ignore_eos:
                kwargs["min_new_tokens"] = test.max_tokens
            t0 = time.perf_counter_ns()
            enc = tok.apply_chat_template(
                [m.model_dump() for m in test.messages],
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )
            enc = {k: v.to(self.device) for k, v in enc.items()}
            lm.generate(**enc, **kwargs)
            self._sync()
            end = time.perf_counter_ns()
            n_sampled = len(stamp.steps)
            finish = (
                "stop"
                if stamp.tokens and eos is not None and stamp.tokens[-1] == eos
                else "length"
            )
            out_tokens = (
                n_sampled - 1 if finish == "stop" and n_sampled > 0 else n_sampled
            )
            ttft = (stamp.first - t0) / 1e6 if stamp.first else None
            e2e = ((stamp.last or end) - t0) / 1e6
            tpot = (
                (e2e - ttft) / (out_tokens - 1)
                if ttft is not None and out_tokens > 1
                else None
            )
            gaps = [(b - a) / 1e6 for a, b in zip(stamp.steps, stamp.steps[1:])]
            return {
                "ttft_ms": ttft,
                "e2e_ms": e2e,
                "tpot_ms": tpot,
                "output_tokens": out_tokens,
                "prompt_tokens": int(enc["input_ids"].shape[1]),
                "finish_reason": finish,
                "itl_ms": gaps,
                "text": stamp.text,
            }

        # the kind's loop (core.kinds.chat.run_requests) over this backend's one primitive, request(seed)
        run = chat_kind.run_requests(test, request, self.settings.seed)
        return TestResult(
            metrics=run.metrics,
            samples={"requests": run.records},
            details={
                "warmup_requests": run.warmup,
                "prefix_cache": False,
                "precision": run.precision,
                "method": "apply_chat_template + generate(streamer=...); sampled tokens timestamped",
            },
        )

    # -- describe -------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        def version(dist: str) -> str | None:
            try:
                return importlib_metadata.version(dist)
            except importlib_metadata.PackageNotFoundError:
                return None

        torch = self.torch
        build: dict[str, Any] = {
            "backend": self.name,
            "transformers": version("transformers"),
            "gguf": version("gguf"),
            "accelerate": version("accelerate"),
        }
        if torch is not None:
            build.update(
                torch=torch.__version__,
                cuda=torch.version.cuda,
                libraries=f"torch {torch.__version__}",
            )
        model: dict[str, Any] = {}
        if self.lm is not None:
            n = sum(int(p.numel()) for p in self.lm.parameters())
            size = sum(
                int(p.numel()) * int(p.element_size()) for p in self.lm.parameters()
            )
            arch = getattr(self.lm.config, "model_type", "?")
            model = {
                "desc": f"{arch} {n / 1e9:.2f}B {self.dtype_name} (dequantized from GGUF)",
                "n_params": n,
                "size_bytes": size,
                "metadata": {},
            }
        return {"build": build, "model": model}

    def close(self) -> None:
        self.lm = None
        self.tok = None
        if self.torch is not None and self.device == "cuda":
            self.torch.cuda.empty_cache()
