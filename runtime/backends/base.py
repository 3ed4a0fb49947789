"""The backend interface: load, run a test, describe. No backend-specific code here.

A backend declares what it is, and the rest of the almanac reads the declaration instead of its
name: the test kinds it runs (``test_kinds``, each with the method that runs it, marked
``@runs("<kind>")``: its dispatch table, checked against the declaration when the class is
defined), whether the model runs in the measuring process (``in_process``: recorded in every
artifact as ``build.in_process``), the server software it can start itself (``servers``), the
settings it honours (``settings_class``, whose fields the docs render), and the prompt styles of
quality items it can put to a model (``prompt_styles``).

A backend sends one request or runs one decode step; a kind owns its loop. The warm-up, how
many samples a test takes (core.precision), the timer around each timed region and the
summary of the samples are the kind's (core/kinds/<kind>.py, ``run_*``); a backend's ``@runs``
method builds the one primitive that loop takes, calls it, and adds the facts only it knows
(its engine's counters, its method in words). The primitives:

==================  ==========================================================================
kind                primitive (the loop that takes it)
==================  ==========================================================================
rate                :class:`RateWork`: ``prepare()`` untimed (empty KV cache, depth filled,
                    random ids drawn), ``decode(prepared)`` timed (prompt batches, then one-token
                    decode steps, synchronised), ``warmup()``, the engine's counters around it
                    (core.kinds.rate.run_rate)
chat                ``request(seed) -> record``: one streamed request timed by the backend (TTFT,
                    inter-token gaps, E2E), or a ``session()`` of them on one connection
                    (core.kinds.chat.run_requests)
serve               behind a server: ``start()``, ``stop()``, ``requests(seeds)``, ``gone()``
                    (core.kinds.serve.run_cold_warm); in process: the chat loop twice, cold
                    then warm (runtime.backends.inprocess.run_serve)
concurrency         ``batch(level, round_offset)``: that many clients at once, ``rounds`` requests
                    each (core.kinds.concurrency.run_levels)
embed               ``embed(texts) -> vectors``: one call (core.kinds.embed.run_embed)
generate            ``generate(prompt_index, max_tokens) -> record``: one greedy generation
                    (core.kinds.generate.run_generate)
load, capacity,     ``transport()``: one request at a time (runtime.load.transport.Transport;
probe, tokenize     the loops are runtime/load/'s)
agent_loop          one model turn: :class:`runtime.agents.loop.Endpoint` (the streamed chat
                    request), and what starts the tool service's process (``Processes``)
                    (runtime.agents.loop.run)
==================  ==========================================================================

``load`` and ``close`` are the rest of a backend's life; ``describe`` what it knows of its build
and model. Enforced: no backend module imports core.precision (import-linter's
``kinds-own-loops``), and none times a region on every pass of a loop
(tests/test_backend_loops.py).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from core.errors import BackendError
from core.kinds.base import TestSpec
from core.kinds.chat import Send
from core.kinds.rate import RateWork
from runtime.models.endpoint import EndpointRef
from runtime.models.registry import ModelRef

# annotations only: a worker loading a backend never reads a run artifact
if TYPE_CHECKING:
    from core.records.run import RunRecord

__all__ = [
    "Backend",
    "BackendSettings",
    "Incompatible",
    "RateWork",
    "Send",
    "TestResult",
    "UnsupportedTest",
    "runs",
]


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
            tname = re.sub(
                r"\bNone\b", "null", tname
            )  # the docs speak JSON/YAML: "int | null"
            rows.append(
                {
                    "name": name,
                    "type": tname,
                    "default": f.get_default(call_default_factory=True),
                    "help": f.description or "",
                }
            )
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


F = TypeVar("F", bound=Callable[..., Any])


def runs(kind: str) -> Callable[[F], F]:
    """Mark the backend method that runs tests of ``kind`` (an entry of the backend's dispatch table)."""

    def mark(fn: F) -> F:
        fn.__almanac_runs__ = kind  # type: ignore[attr-defined]
        return fn

    return mark


class Backend(abc.ABC):
    """One way of running a model. Subclasses live in their own package under backends/."""

    name: ClassVar[str]
    settings_class: ClassVar[type[BackendSettings]]
    #: The test kinds this backend runs (core.kinds): each needs a method marked ``@runs(kind)``,
    #: and every such method a kind declared here (checked when the class is defined).
    test_kinds: ClassVar[tuple[str, ...]]
    #: kind -> name of the method that runs it: built from the ``@runs`` methods (inherited too).
    dispatch: ClassVar[dict[str, str]] = {}
    #: Whether the model runs in the measuring process (True: load time, peak RSS and VRAM are
    #: the model's) or behind a server the backend talks to (False). Recorded in every artifact
    #: as ``build.in_process``; pipelines read that, never a backend's name.
    in_process: ClassVar[bool]
    #: The server software this backend can start itself (empty in process); a server given by
    #: URL is whatever it is, and the run records what it detected (``build.server``).
    servers: ClassVar[tuple[str, ...]] = ()
    #: How quality items can be put to a model through this backend: ``chat`` (messages
    #: through the chat template), ``completion`` (raw text continued), ``loglikelihood``
    #: (log-probabilities of given continuations; needs the logits).
    prompt_styles: ClassVar[tuple[str, ...]] = ("chat",)
    #: Which kinds of model it measures: ``file`` (a local GGUF, runtime.models.registry.ModelRef)
    #: and/or ``endpoint`` (a model a server serves, with no local file: runtime.models.endpoint).
    model_kinds: ClassVar[tuple[str, ...]] = ("file",)
    #: What a test kind means for this backend where that differs from the kind's own
    #: description (e.g. ``serve`` in process: no server, the load in a fresh process is the
    #: cold start). Shown on the Methodology page.
    kind_notes: ClassVar[dict[str, str]] = {}

    @classmethod
    def identify(cls, model: EndpointRef) -> EndpointRef:
        """Ask the server of an endpoint model what it serves (software, version, the model's
        identity) and check the entry's pins; only a backend whose ``model_kinds`` has
        ``endpoint`` can. Bad input (a pin the server contradicts, a server that does not
        answer) raises a UserError of one line."""
        raise BackendError(
            f"backend {cls.name} cannot measure endpoint models (model {model.name!r})",
            field="backend",
        )

    @classmethod
    def command_lines(cls, run: RunRecord) -> dict[str, str] | None:
        """The command lines that reproduce one of its runs outside the almanac, as
        ``{label: command}`` (llama.cpp's: ``server``, ``bench``, ``python`` and ``notes``), or
        None: this one prints none. The site shows them beside the Optimization page's best points."""
        return None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                kind = getattr(value, "__almanac_runs__", None)
                if kind is not None:
                    table[kind] = attr
        cls.dispatch = table
        if "test_kinds" not in vars(cls) and not table:
            return  # an abstract intermediate class that declares nothing yet
        declared = tuple(getattr(cls, "test_kinds", ()))
        missing = [k for k in declared if k not in table]
        undeclared = [k for k in table if k not in declared]
        if missing or undeclared:
            parts = (
                [
                    f"declares test kinds {missing} but no method runs them (mark one @runs(kind))"
                ]
                if missing
                else []
            ) + (
                [
                    f"has @runs methods for {undeclared}, which it does not declare in test_kinds"
                ]
                if undeclared
                else []
            )
            raise TypeError(f"backend {cls.__qualname__}: " + "; ".join(parts))
        for kind, attr in table.items():
            if not callable(getattr(cls, attr, None)):
                raise TypeError(
                    f"backend {cls.__qualname__}: the runner of {kind!r} ({attr}) is not a method"
                )
        if not isinstance(getattr(cls, "in_process", None), bool):
            raise TypeError(
                f"backend {cls.__qualname__}: declare in_process (True: the model runs in the measuring "
                "process; False: behind a server the backend talks to)"
            )

    @classmethod
    def declaration(cls) -> dict[str, Any]:
        """What the backend is, for the docs and for readers of the code: no behaviour, only facts."""
        return {
            "name": cls.name,
            "in_process": cls.in_process,
            "servers": list(cls.servers),
            "test_kinds": list(cls.test_kinds),
            "prompt_styles": list(cls.prompt_styles),
            "model_kinds": list(cls.model_kinds),
            "kind_notes": dict(cls.kind_notes),
            "settings": [f for f in cls.settings_class.model_fields],
        }

    def __init__(self, model: ModelRef | EndpointRef | None, settings: BackendSettings):
        self.model = model
        self.settings = settings

    @abc.abstractmethod
    def load(self, test: TestSpec | None = None) -> dict[str, Any]:
        """Load the model for ``test`` (some settings, like llama-bench's context size,
        follow the test); return {'load_time_s': float, 'effective_settings': {...}}."""

    def run(self, test: TestSpec) -> TestResult:
        """Run one test on the loaded model: the method the dispatch table names for its kind."""
        attr = self.dispatch.get(test.kind)
        if attr is None:
            raise UnsupportedTest(
                f"backend {self.name} cannot run tests of kind {test.kind!r} "
                f"(it runs: {', '.join(self.test_kinds) or 'none'})"
            )
        return getattr(self, attr)(test)

    def supports(self, test: TestSpec | None) -> bool:
        return test is None or test.kind in self.dispatch

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Build and model facts this backend knows: {'build': {...}, 'model': {...}}."""

    @classmethod
    def context_tokens(cls, settings: BackendSettings, test: TestSpec) -> int | None:
        """The context (tokens) this configuration makes the backend allocate in this process,
        for the resource preflight (runtime.execution.preflight); None: it loads no model here (e.g. HTTP)."""
        return None

    @classmethod
    def cannot_honour(
        cls, settings: BackendSettings, model: ModelRef | EndpointRef, test: TestSpec
    ) -> tuple[str, str] | None:
        """A setting this backend cannot honour for this test, though it is valid on its own (more
        parallel slots than the context has room for): ``(setting, why)``. The runner measures nothing
        for that point, prints one line naming the matrix and the setting, and the sweep goes on.
        Default: every valid setting can be honoured."""
        return None

    @classmethod
    def preflight(
        cls, settings: BackendSettings, model: ModelRef | EndpointRef, test: TestSpec
    ) -> None:
        """Check one configuration against the model's metadata before anything runs. Raise
        ``ConfigError(message, field=<setting>)`` for one the backend would abort on; the
        runner adds the matrix file. Default: nothing to check."""
        return None

    @staticmethod
    def log_facts(log: str) -> dict[str, Any]:
        """Facts the backend's own log states about what really ran (merged into effective settings)."""
        return {}

    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int,
        stop: list[str],
        temperature: float = 0.0,
        seed: int = 0,
    ) -> dict[str, Any]:
        """Continue raw text (prompt style ``completion``): {'text', 'prompt_tokens', 'output_tokens',
        'e2e_ms', 'finish_reason'}."""
        raise UnsupportedTest(f"backend {self.name} has no completion prompt style")

    def loglikelihood(
        self, context: str, continuations: list[str]
    ) -> list[dict[str, Any]]:
        """log p(continuation | context) per continuation (prompt style ``loglikelihood``):
        [{'logprob', 'n_tokens', 'is_greedy', 'n_bytes'}]."""
        raise UnsupportedTest(f"backend {self.name} has no loglikelihood prompt style")

    def close(self) -> None:
        """Free what load() took."""
        return None
