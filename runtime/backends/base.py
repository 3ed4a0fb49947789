"""The backend interface: load, run a test, describe. No backend-specific code here."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from runtime.models.registry import ModelRef
from core.kinds.base import TestSpec


class BackendSettings(BaseModel):
    """Base of every backend's settings: unknown names are refused (one place validates)."""

    model_config = ConfigDict(extra="forbid")
    #: Settings added after artifacts were written: left at their default, they are left out of
    #: what a run records as requested and of its measurement key (:meth:`recorded`), so adding
    #: them does not make every configuration measured before a new one.
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ()

    def recorded(self) -> dict[str, Any]:
        """The settings as a run records them (requested settings, measurement key): every field,
        except those of ``OMITTED_AT_DEFAULT`` still at their default."""
        out = self.model_dump(mode="json")
        for name in self.OMITTED_AT_DEFAULT:
            f = type(self).model_fields[name]
            if out.get(name) == f.get_default(call_default_factory=True):
                out.pop(name, None)
        return out

    @classmethod
    def option_table(cls) -> list[dict[str, Any]]:
        """Name, type, default and help of every field, for the docs."""
        rows = []
        for name, f in cls.model_fields.items():
            ann = f.annotation
            tname = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
            rows.append({"name": name, "type": tname, "default": f.get_default(call_default_factory=True),
                         "help": f.description or ""})
        return rows


class UnsupportedTest(Exception):
    """The backend cannot run this kind of test; recorded as a failed artifact with the reason."""

    kind = "unsupported"  # the artifact's error kind


class Incompatible(UnsupportedTest):
    """The configuration cannot work with this model (a draft model of another vocabulary,
    speculation on a recurrent model, ...): a failed point of kind "incompatible", with the reason."""

    kind = "incompatible"


@dataclass
class TestResult:
    """What a backend measured for one test.

    ``metrics`` maps a registered metric name to its samples (summarised by the runner);
    ``samples`` keeps the raw records (per repetition, per request) verbatim; ``details``
    holds anything else worth keeping (perf counters, the text generated, ...).
    """

    metrics: dict[str, list[float]]
    samples: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)


class Backend(abc.ABC):
    """One way of running a model. Subclasses live in their own package under backends/."""

    name: ClassVar[str]
    settings_class: ClassVar[type[BackendSettings]]
    test_kinds: ClassVar[tuple[str, ...]]
    #: Whether the model runs in the measuring process (True: load time, peak RSS and VRAM are
    #: the model's) or behind a server the backend talks to (False). Recorded in every artifact
    #: as ``build.in_process``; pipelines read that, never a backend's name.
    in_process: ClassVar[bool]
    #: How quality items can be put to a model through this backend: ``chat`` (messages
    #: through the chat template), ``completion`` (raw text continued), ``loglikelihood``
    #: (log-probabilities of given continuations; needs the logits).
    prompt_styles: ClassVar[tuple[str, ...]] = ("chat",)

    def __init__(self, model: ModelRef | None, settings: BackendSettings):
        self.model = model
        self.settings = settings

    @abc.abstractmethod
    def load(self, test: TestSpec | None = None) -> dict[str, Any]:
        """Load the model for ``test`` (some settings, like llama-bench's context size,
        follow the test); return {'load_time_s': float, 'effective_settings': {...}}."""

    @abc.abstractmethod
    def run(self, test: TestSpec) -> TestResult:
        """Run one test on the loaded model."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Build and model facts this backend knows: {'build': {...}, 'model': {...}}."""

    @classmethod
    def context_tokens(cls, settings: BackendSettings, test: TestSpec) -> int | None:
        """The context (tokens) this configuration makes the backend allocate in this process,
        for the resource preflight (runtime.execution.preflight); None: it loads no model here (e.g. HTTP)."""
        return None

    @classmethod
    def preflight(cls, settings: BackendSettings, model: ModelRef, test: TestSpec) -> None:
        """Check one configuration against the model's metadata before anything runs. Raise
        ``ConfigError(message, field=<setting>)`` for one the backend would abort on; the
        runner adds the matrix file. Default: nothing to check."""

    @staticmethod
    def log_facts(log: str) -> dict[str, Any]:
        """Facts the backend's own log states about what really ran (merged into effective settings)."""
        return {}

    def complete(self, prompt: str, *, max_tokens: int, stop: list[str], temperature: float = 0.0,
                 seed: int = 0) -> dict[str, Any]:
        """Continue raw text (prompt style ``completion``): {'text', 'prompt_tokens', 'output_tokens',
        'e2e_ms', 'finish_reason'}."""
        raise UnsupportedTest(f"backend {self.name} has no completion prompt style")

    def loglikelihood(self, context: str, continuations: list[str]) -> list[dict[str, Any]]:
        """log p(continuation | context) per continuation (prompt style ``loglikelihood``):
        [{'logprob', 'n_tokens', 'is_greedy', 'n_bytes'}]."""
        raise UnsupportedTest(f"backend {self.name} has no loglikelihood prompt style")

    def close(self) -> None:
        """Free what load() took."""
