"""``invoke ab``: measure two builds or settings interleaved until the difference is decided.

A side is a spec, ``key=value`` pairs separated by commas:

* ``build=ordinary`` (the build as it is) or ``build=threads-halved`` (the deliberately slowed
  variant: half the physical cores as threads), see ``VARIANTS``;
* ``label=NAME``: a build variant that changes nothing, named (two labels = an A/A);
* ``test=`` / ``model=``: only these tests or models of the matrix (``a|b`` for several);
* any other key: a setting of the matrix's backend for this side (``n_threads=1``,
  ``flash_attn=off``), checked against the backend's settings before anything runs.

The work is the matrix's configurations (model x settings x test) that both sides select; each
side runs it with its own variant. Runs go in ABBA blocks (A B B A: a drift that is linear over
a block hits both sides alike), every run a fresh child process (runtime.execution.runner), until
every shared configuration is decided or the time budget ends. After each scheduled look the
ratio B/A of every configuration gets a t interval over its blocks (core.stats.ab_decide:
Bonferroni over the looks the budget allows, so stopping as soon as it decides keeps the stated
confidence), and the verdict: win or loss when the interval lies beyond 1 ± threshold,
equivalent when it lies within, else undecided, with the smallest change the budget could have
detected.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import artifacts, stats
from core.errors import UserError
from core.kinds import headline
from core.paths import project_root, relpath
from core.records import run as record
from runtime import backends
from runtime.execution import matrix as matrix_mod
from runtime.execution import runlock, runner
from runtime.hosts import fingerprint as hostinfo
from runtime.models import registry as models

KEYS = ("build", "label", "test", "model")
#: Blocks after which the interval is looked at (about x1.4 apart: few looks, so the Bonferroni share stays small).
LOOKS = (3, 4, 6, 8, 11, 16, 22, 32, 45, 64, 90, 128, 181, 256)
MIN_BLOCKS = LOOKS[0]


class ABError(UserError):
    """Bad A/B input: identical sides, sides without shared work, a budget too short."""


def threads_halved(fp: dict[str, Any] | None = None) -> runner.BuildVariant:
    """The deliberately slowed build: half the physical cores (at least 1) as threads."""
    fp = fp or hostinfo.fingerprint()
    cores = fp["cpu"]["physical_cores"] or 2
    threads = max(1, cores // 2)
    return runner.BuildVariant(
        "threads-halved",
        f"deliberately slowed build: {threads} thread(s) instead of the {cores} "
        "physical cores llama.cpp's default uses",
        {"n_threads": threads, "n_threads_batch": threads},
    )


def batch_of_one() -> runner.BuildVariant:
    """A deliberately slowed prompt processing: a physical batch of one token (each prompt token its own
    decode call). Unlike threads halved, it stays slower on an oversubscribed host, where two threads that
    wait for each other can be slower than one: a planted regression for tests of a search."""
    return runner.BuildVariant(
        "batch-of-one",
        "deliberately slowed build: a physical batch of one token (n_ubatch 1) instead of 512",
        {"n_ubatch": 1},
    )


VARIANTS: dict[str, Callable[[], runner.BuildVariant | None]] = {
    "ordinary": lambda: None,
    "threads-halved": threads_halved,
    "batch-of-one": batch_of_one,
}


@dataclass(frozen=True)
class Side:
    text: str
    build: str | None = None
    label: str | None = None
    tests: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    settings: tuple[tuple[str, Any], ...] = ()

    def identity(self) -> str:
        return json.dumps(
            [
                self.build or "ordinary",
                self.label,
                sorted(self.tests),
                sorted(self.models),
                sorted(self.settings),
            ],
            default=str,
        )

    def variant(self) -> runner.BuildVariant | None:
        base = VARIANTS[self.build or "ordinary"]()
        overrides = dict(base.overrides) if base else {}
        overrides.update(dict(self.settings))
        label = self.label or (base.label if base else None)
        if self.settings:
            extra = ",".join(f"{k}={v}" for k, v in self.settings)
            label = f"{label}+{extra}" if label else extra
        if label is None:
            return None
        desc = (
            (base.description if base else "the build as it is")
            + (f"; settings {dict(self.settings)}" if self.settings else "")
            + ("" if base or self.settings else "; a label only: changes nothing")
        )
        return runner.BuildVariant(label, desc, overrides)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_side(text: str, name: str, settings_cls: Any) -> Side:
    """``build=threads-halved,test=tg16`` -> Side; ABError names the bad part."""
    if not text or not text.strip():
        raise ABError(
            "is empty; write key=value pairs, e.g. build=ordinary or build=threads-halved",
            field=name,
        )
    parts: dict[str, Any] = {"tests": (), "models": (), "settings": []}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ABError(
                f"{part!r} is not key=value (keys: {', '.join(KEYS)}, or a backend setting)",
                field=name,
            )
        k, v = (s.strip() for s in part.split("=", 1))
        if not v:
            raise ABError(f"{k}= has no value", field=name)
        if k == "build":
            if v not in VARIANTS:
                raise ABError(
                    f"build={v!r} is not a known build (known: {', '.join(VARIANTS)}; label=NAME names "
                    "a build that changes nothing)",
                    field=name,
                )
            parts["build"] = v
        elif k == "label":
            parts["label"] = v
        elif k in ("test", "model"):
            parts[k + "s"] = tuple(x.strip() for x in v.split("|") if x.strip())
        elif k in settings_cls.model_fields:
            parts["settings"].append((k, _value(v)))
        else:
            import difflib

            close = difflib.get_close_matches(
                k, list(KEYS) + list(settings_cls.model_fields), n=1
            )
            raise ABError(
                f"unknown key {k!r} (keys: {', '.join(KEYS)}, or a setting of the backend)"
                + (f"; did you mean {close[0]!r}?" if close else ""),
                field=name,
            )
    if parts["settings"]:
        try:
            settings_cls.model_validate(dict(parts["settings"]))
        except Exception as exc:
            raise ABError(
                f"invalid setting: {str(exc).splitlines()[-1].strip()}", field=name
            ) from None
    return Side(
        text.strip(),
        parts.get("build"),
        parts.get("label"),
        parts["tests"],
        parts["models"],
        tuple(sorted(parts["settings"], key=lambda kv: kv[0])),
    )


def _selects(side: Side, cfg: matrix_mod.Configuration) -> bool:
    return (not side.tests or cfg.test.name in side.tests) and (
        not side.models or cfg.model in side.models
    )


def _work_id(cfg: matrix_mod.Configuration) -> str:
    return f"{cfg.model} · {cfg.test.name}" + (
        ""
        if not cfg.swept
        else " · " + ", ".join(f"{k}={v}" for k, v in cfg.swept.items())
    )


@dataclass
class Work:
    """One shared configuration: its runs per side, in order, and where its decision stands."""

    cfg: matrix_mod.Configuration
    name: str
    metric: str
    higher_is_better: bool
    a: list[dict[str, Any]] = field(
        default_factory=list
    )  # {"id", "mean", "block", "path"}
    b: list[dict[str, Any]] = field(default_factory=list)
    decision: stats.ABDecision | None = None

    def block_diffs(self) -> list[float]:
        out = []
        for blk in sorted({r["block"] for r in self.a} & {r["block"] for r in self.b}):
            la = [
                math.log(r["mean"])
                for r in self.a
                if r["block"] == blk and r["mean"] > 0
            ]
            lb = [
                math.log(r["mean"])
                for r in self.b
                if r["block"] == blk and r["mean"] > 0
            ]
            if len(la) == 2 and len(lb) == 2:  # a whole block only
                out.append(sum(lb) / 2 - sum(la) / 2)
        return out

    @property
    def decided(self) -> bool:
        return self.decision is not None and self.decision.verdict != "undecided"


@dataclass
class ABResult:
    a: Side
    b: Side
    matrix: str
    threshold: float
    confidence: float
    budget_s: float
    elapsed_s: float
    block_s: float
    planned_blocks: int
    looks: int
    stopped: str
    work: list[Work]
    root: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.text,
            "b": self.b.text,
            "matrix": self.matrix,
            "threshold": self.threshold,
            "confidence": self.confidence,
            "budget_s": self.budget_s,
            "elapsed_s": round(self.elapsed_s, 1),
            "block_s": round(self.block_s, 1),
            "planned_blocks": self.planned_blocks,
            "looks": self.looks,
            "stopped": self.stopped,
            "runs_root": self.root,
            "work": [
                {
                    "configuration": w.name,
                    "metric": w.metric,
                    "higher_is_better": w.higher_is_better,
                    "a_runs": w.a,
                    "b_runs": w.b,
                    "block_diffs": w.block_diffs(),
                    "decision": w.decision.to_dict() if w.decision else None,
                }
                for w in self.work
            ],
        }


def _looks_within(blocks: int) -> int:
    """The looks a budget of ``blocks`` blocks takes: the scheduled ones, and one at the end."""
    return sum(1 for k in LOOKS if k <= blocks) + 1


def _estimate_run_s(
    cfg: matrix_mod.Configuration, host_id: str
) -> tuple[float | None, str]:
    """Wall time of one run of ``cfg`` on this host: the newest artifact of the same matrix, model and
    test in data/runs (any build), else the newest ``invoke noise`` artifact's runs of that test; None
    without either."""
    from core.paths import data_dir, runs_dir

    best = None
    for r in (
        record.read_all(runs_dir() / host_id) if (runs_dir() / host_id).exists() else []
    ):
        if (
            r.matrix_name == cfg.matrix
            and r.test_name == cfg.test.name
            and r.model_name == cfg.model
            and r.ok
        ):
            if best is None or r.created > best.created:
                best = r
    if best is not None and best.resources.wall_s:
        return float(
            best.resources.wall_s
        ), f"the newest run of it on this host ({best.id})"
    hosts = data_dir() / "hosts" / host_id
    noise_docs = sorted(hosts.glob("noise-*.json")) if hosts.exists() else []
    if noise_docs and cfg.matrix == "noise":
        doc = artifacts.load(noise_docs[-1])
        walls = [
            r["wall_s"]
            for r in doc["runs"]
            if r["test"] == cfg.test.name and r.get("wall_s")
        ]
        if walls:
            return sorted(walls)[len(walls) // 2], f"the median run of {doc['id']}"
    return None, ""


def run_ab(
    a_text: str,
    b_text: str,
    *,
    matrix: str = "noise",
    threshold: float = 0.05,
    budget_s: float = 600.0,
    confidence: float = 0.95,
    root: Path | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> ABResult:
    """Interleave A and B (ABBA blocks, fresh processes) until each shared configuration is decided or
    the budget ends. Bad input raises ABError before anything runs."""
    emit = on_event or (lambda kind, info: None)
    if not 0 < threshold < 1:
        raise ABError(
            f"{threshold:g} is not a fraction between 0 and 1 (0.05: ±5%)",
            field="--threshold",
        )
    if budget_s <= 0:
        raise ABError(
            f"{budget_s:g} is not a positive number of seconds", field="--budget"
        )
    m = matrix_mod.load(matrix)
    cls = backends.settings_class(m.spec.backend)
    sa, sb = parse_side(a_text, "-a", cls), parse_side(b_text, "-b", cls)
    if sa.identity() == sb.identity():
        raise ABError(
            f"A ({sa.text}) and B ({sb.text}) select the same build and settings: there is nothing to compare "
            "(two labels, label=x and label=y, measure an A/A)"
        )
    cfgs = m.configurations()
    shared = [c for c in cfgs if _selects(sa, c) and _selects(sb, c)]
    if not shared:
        raise ABError(
            f"A ({sa.text}) and B ({sb.text}) share no work in matrix {m.name} "
            f"(tests: {', '.join(dict.fromkeys(c.test.name for c in cfgs))}; models: "
            f"{', '.join(dict.fromkeys(c.model for c in cfgs))})"
        )
    for cfg in shared:
        h = headline(cfg.test.kind)
        if h is None:
            raise ABError(
                f"test {cfg.test.name} has no headline metric to compare", field="-a"
            )
    va, vb = sa.variant(), sb.variant()
    registry = models.load_registry()
    refs = {
        name: models.resolve(name, registry)
        for name in dict.fromkeys(c.model for c in shared)
    }
    for cfg in shared:
        runner.preflight(cfg, refs[cfg.model])
    fp = hostinfo.fingerprint()
    # one round (A B B A of every shared configuration): from earlier runs when there are some
    est = [_estimate_run_s(c, fp["id"]) for c in shared]
    round_s = 4 * sum(e[0] for e in est) if all(e[0] for e in est) else None
    if round_s is not None and budget_s < round_s:
        raise ABError(
            f"{budget_s:g} s is too short for one round (A B B A of {len(shared)} configuration(s)): one round "
            f"takes about {round_s:.0f} s on this host (from {est[0][1]}); give at least {math.ceil(round_s)}",
            field="--budget",
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    root = Path(root) if root else project_root() / "build" / "ab" / stamp / "runs"
    work = [
        Work(
            c,
            _work_id(c),
            headline(c.test.kind).name,
            headline(c.test.kind).higher_is_better,
        )
        for c in shared
    ]
    t0 = time.perf_counter()
    planned, looks = None, 1
    stopped = "budget"
    with runlock.run_lock(root, fp["id"]):
        block = 0
        while True:
            block += 1
            tb = time.perf_counter()
            for slot, (side, variant, runs_of) in enumerate(
                (("A", va, "a"), ("B", vb, "b"), ("B", vb, "b"), ("A", va, "a"))
            ):
                for w in work:
                    if w.decided:
                        continue
                    r = _one_run(w.cfg, refs[w.cfg.model], fp, variant, root)
                    getattr(w, runs_of).append({**r, "block": block})
                    emit(
                        "run",
                        {"block": block, "side": side, "configuration": w.name, **r},
                    )
                if (
                    block == 1 and slot == 0 and round_s is None
                ):  # no earlier run to estimate from: the first one
                    first = time.perf_counter() - tb
                    if budget_s < 4 * first:
                        raise ABError(
                            f"{budget_s:g} s is too short for one round (A B B A of {len(shared)} "
                            f"configuration(s)): the first runs of A took {first:.1f} s here, a round about "
                            f"{4 * first:.0f} s; give at least {math.ceil(4 * first)} (runs so far: "
                            f"{relpath(root)})",
                            field="--budget",
                        )
            block_s = time.perf_counter() - tb
            if planned is None:
                planned = max(block, int(budget_s // max(block_s, 1e-3)))
                looks = _looks_within(planned)
            if block in LOOKS or block == planned:
                for w in work:
                    if not w.decided:
                        w.decision = stats.ab_decide(
                            w.block_diffs(),
                            threshold,
                            w.higher_is_better,
                            looks=looks,
                            planned_blocks=planned,
                            confidence=confidence,
                        )
                emit(
                    "look",
                    {"block": block, "work": [(w.name, w.decision) for w in work]},
                )
            if all(w.decided for w in work):
                stopped = "decided"
                break
            elapsed = time.perf_counter() - t0
            if elapsed + block_s > budget_s:
                break
    for w in work:  # the last look, whatever the schedule
        if not w.decided:
            w.decision = stats.ab_decide(
                w.block_diffs(),
                threshold,
                w.higher_is_better,
                looks=looks,
                planned_blocks=planned or 1,
                confidence=confidence,
            )
    return ABResult(
        sa,
        sb,
        m.name,
        threshold,
        confidence,
        budget_s,
        time.perf_counter() - t0,
        block_s,
        planned or 1,
        looks,
        stopped,
        work,
        relpath(root),
    )


def _one_run(
    cfg: matrix_mod.Configuration,
    ref: models.ModelRef,
    fp: dict[str, Any],
    variant: runner.BuildVariant | None,
    root: Path,
    build: Any = None,
) -> dict[str, Any]:
    """One measuring run in a fresh child; ``build`` (runtime.execution.builds.Build, probed): another
    installed build's Python and environment, keyed by its own binding version."""
    settings = runner.merged_settings(cfg, ref)
    if build is not None:
        bversion = build.backend_version()
    else:
        bversion = backends.version(cfg.backend)
    key = record.config_key(
        cfg.backend,
        ref.sha256,
        settings.recorded(),  # what the artifact records as requested, as the runner keys a point
        cfg.test.to_dict(),
        fp["id"],
        bversion,
        build_label=variant.label if variant else None,
    )
    job_settings = settings.model_dump(mode="json")
    if variant is not None:
        job_settings.update(variant.overrides)
    job = {
        "backend": cfg.backend,
        "model": ref.to_dict(),
        "settings": job_settings,
        "test": cfg.test.model_dump(mode="json"),
    }
    outcome = runner.run_quietly(
        job,
        cfg.timeout_s,
        python=build.python if build is not None else None,
        extra_env=build.child_env() if build is not None else None,
    )
    doc = runner.build_artifact(
        cfg=cfg,
        ref=ref,
        settings=settings,
        host=fp,
        key=key,
        backend_version=bversion,
        outcome=outcome,
        build_variant=variant,
    )
    path = artifacts.write(runner.artifact_path(doc, root), doc)
    h = headline(cfg.test.kind)
    s = (doc["summary"].get(h.name) or {}) if doc["status"] == "ok" else {}
    if doc["status"] != "ok" or not s.get("mean"):
        raise UserError(
            f"a run failed ({(doc.get('error') or {}).get('message')}): {relpath(path)}"
        )
    return {
        "id": doc["id"],
        "mean": float(s["mean"]),
        "n": int(s["n"]),
        "wall_s": round(outcome.wall_s, 2),
        "path": relpath(path),
    }


# -- output -----------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


def markdown(res: ABResult) -> str:
    lines = [
        f"A: `{res.a.text}` · B: `{res.b.text}` · matrix {res.matrix} · threshold ±{100 * res.threshold:g}% · "
        f"{res.work[0].decision.blocks if res.work and res.work[0].decision else 0} block(s) of A B B A in "
        f"{res.elapsed_s:.0f} s (budget {res.budget_s:g} s, a block about {res.block_s:.0f} s; stopped: {res.stopped})",
        "",
        "| configuration | metric | A runs | B runs | B/A | interval | verdict | detectable at this budget |",
        "| :-- | :-- | --: | --: | --: | --: | :-- | --: |",
    ]
    for w in res.work:
        d = w.decision
        ci = (
            "—"
            if d is None or d.low is None
            else f"[{d.low:.3f}, {d.high:.3f}] ({100 * d.confidence:.2f}%)"
        )
        ratio = "—" if d is None or d.ratio is None else f"{d.ratio:.3f}"
        mde = (
            "—" if d is None or d.mde is None else f"changes beyond ±{100 * d.mde:.1f}%"
        )
        lines.append(
            f"| {w.name} | {w.metric} ({'higher' if w.higher_is_better else 'lower'} is better) | {len(w.a)} | "
            f"{len(w.b)} | {ratio} | {ci} | {d.verdict if d else 'undecided'} | {mde} |"
        )
    lines += [
        "",
        "Verdict: win or loss when the interval of B/A lies beyond 1 ± threshold, equivalent when it lies "
        "within, undecided otherwise. The interval is a t interval over blocks (each block: mean log B − mean "
        f"log A of its A B B A runs) at {100 * res.confidence:g}% overall, Bonferroni over the {res.looks} look(s) "
        "the budget allowed; 'detectable' is the smallest true change that would be called win or loss with 80% "
        "power after the blocks the budget allows. Runs: " + res.root,
    ]
    return "\n".join(lines) + "\n"


def write_outputs(res: ABResult, out: Path) -> list[Path]:
    from core.artifacts import atomic_write_text

    base = out.with_suffix("") if out.suffix in (".md", ".json") else out
    paths = [base.with_suffix(".md"), base.with_suffix(".json")]
    atomic_write_text(paths[0], markdown(res))
    atomic_write_text(
        paths[1],
        json.dumps(res.to_dict(), indent=2, sort_keys=True, default=str) + "\n",
    )
    return paths
