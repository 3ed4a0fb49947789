"""The site at scale: time `invoke site.build` on N synthetic but schema-valid artifacts.

For each N the script writes a scratch data folder: the project's inputs (registries,
matrices, suites) plus N artifacts derived from the committed ones. Copy 0 is the committed
set itself; copy c > 0 of an artifact gets a host other than the committed ones (one of
HOSTS variants of its host), a model other than the committed ones (one of MODELS variants:
name and file hash), a distinct key and id (every copy is a configuration of its own, as a
nightly run with a new build is), and a date c days earlier, and is validated against its schema
before it is written. Projection and decision records are
not copied, nor are noise estimates (they summarise a host's runs; the originals stay).

It then builds the site from that folder (ALMANAC_DATA) twice: cold (empty validation cache)
and warm (the cache the first build left: a repeated build), reporting wall seconds and the
peak resident memory of the whole process tree (psutil, sampled every 100 ms), and the
largest pages. With --all-noop N it also times `invoke all` with nothing new at N artifacts.

    python benchmarks/site_scale.py --sizes 100,1000,10000 --out benchmarks/results/cpu/site-scale.json

Fleet mode (``--mode fleet --hosts H``): the artifacts are spread over H hosts that all run the
SAME reference workload (data/matrices/reference.yaml), as a real fleet does: same model files
(sha256), same tests, same requested settings, same backend build. After the committed set,
each fleet host gets one host artifact (its fingerprint: a CPU model, cores, memory and, for
every fifth host, GPUs of its own) and then rounds of the committed CPU host's reference runs
(a nightly run each round, one day apart, so each host has a history of every reference
configuration), filled configuration by configuration across all hosts so that even a small N
has every host sharing work. A host's measured values are the template's times a speed of its
own (log-uniform, GPU hosts 10-60x) times a per-round noise of about 2%: hosts differ as real
machines do, and each host's key is that of its own configuration (same host + same work =
same key, a history).

    python benchmarks/site_scale.py --mode fleet --hosts 200 --sizes 1000,10000 --out ...

``--every-kind``: every fleet host runs every configuration of every kind the committed CPU host
ran (rate, chat, generate and agent loops, serving, concurrency, and its quality suites: 85
configurations), a team's nightly matrices, instead of the 4 reference ones. ``--incremental``:
after the cold and warm builds, one more host's first reference run (its probe and the 4
reference configurations) is added and the rebuild timed (the validation cache warm):

    python benchmarks/site_scale.py --mode fleet --every-kind --hosts 500 --sizes 100000 --incremental

``--builds`` picks the builds to time (default ``cold,warm``); with ``--scratch`` and ``--reuse`` a size
can be generated once (``--generate-only``, outside the lock) and its builds timed over several short calls
(``--builds cold``, ``--builds warm``, ``--builds "" --incremental``: each call reuses the validation cache
the last one left). Each build records the load average before and after it.

Run the measurements on a quiet machine (flock -w 3600 /tmp/almanac-measure.lock ...).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import artifacts  # noqa: E402
from core.paths import slug  # noqa: E402

ARTIFACT_DIRS = ("runs", "hosts", "projections", "quality", "perplexity")
HOSTS = 8  # variants per committed host: a few hosts that benchmark every night
MODELS = (
    16  # variants per committed model: a team's model zoo grows slower than its history
)


def _sha(*parts: Any) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def _stamp(created: datetime, ms: bool) -> str:
    return (
        created.strftime("%Y%m%dT%H%M%S")
        + (f".{created.microsecond // 1000:03d}" if ms else "")
        + "Z"
    )


def variant(doc: dict[str, Any], c: int) -> tuple[dict[str, Any], str]:
    """Copy ``c`` of an artifact: distinct host, model, key, id and date; and its path in data/."""
    d = json.loads(json.dumps(doc))
    host = f"{doc['host']['id']}-s{c % HOSTS}"
    d["host"] = dict(
        d["host"], id=host, name=f"{doc['host'].get('name', host)}-s{c % HOSTS}"
    )
    created = datetime.fromisoformat(doc["created"]) - timedelta(days=c)
    d["created"] = (
        created.isoformat(timespec="seconds")
        if "." not in doc["created"]
        else created.isoformat()
    )
    kind = d["artifact"]
    if kind == "host":
        d["id"] = f"{host}-{_stamp(created, False)}"
        name = re.sub(r"-\d{8}T\d{6}Z\.json$", "", Path(doc["_file"]).name)
        return d, f"hosts/{host}/{name}-{_stamp(created, False)}.json"
    model = d["model"]
    model["name"] = f"{model['name']}-m{c % MODELS}"
    if model.get("sha256"):
        model["sha256"] = _sha(model["sha256"], c % MODELS)
    d["key"] = _sha(doc["key"], c)
    ms = "." in doc["id"].split("-", 1)[1]
    prefix = {"quality": "q", "perplexity": "p"}.get(kind, "")
    d["id"] = f"{prefix}{d['key'][:12]}-{_stamp(created, ms)}"
    if (d.get("matrix") or {}).get("baseline_key"):
        d["matrix"]["baseline_key"] = _sha(doc["matrix"]["baseline_key"], c)
    if kind == "run":
        what, folder = doc["test"]["name"], "runs"
    elif kind == "quality":
        what, folder = doc["suite"]["name"], "quality"
    else:  # perplexity: its file name says what it measured (ppl, or kld-vs-<reference>)
        what, folder = Path(doc["_file"]).name.split("--", 1)[0], "perplexity"
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", what)
    return (
        d,
        f"{folder}/{host}/{slug(model['name'])}/{safe}--{d['key'][:16]}-{d['id'].split('-', 1)[1]}.json",
    )


FLEET_CPUS = (
    "Intel(R) Xeon(R) Platinum 8480+",
    "AMD EPYC 9654 96-Core Processor",
    "Intel(R) Core(TM) i7-12700",
    "AMD Ryzen 9 7950X 16-Core Processor",
    "Apple M2 Max",
    "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
    "AMD EPYC 7763 64-Core Processor",
    "Neoverse-V2",
)
FLEET_GPUS = (
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA L4",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA H200",
)
HEADLINE_SCALED = (
    "tokens_per_second",
)  # the reference workload's rate metric (pp512 and tg128)


def fleet_host(
    i: int, template: dict[str, Any], gpu_template: dict[str, Any] | None
) -> dict[str, Any]:
    """Fleet host ``i``'s fingerprint (a host block): CPU, cores, memory and, every fifth host, GPUs."""
    import random

    rnd = random.Random(f"host-{i}")
    h = json.loads(json.dumps(template))
    cores = rnd.choice((2, 4, 8, 16, 32, 64))
    h["cpu"] = dict(
        h["cpu"],
        model=FLEET_CPUS[i % len(FLEET_CPUS)],
        physical_cores=cores,
        logical_cores=cores * rnd.choice((1, 2)),
    )
    h["memory_bytes"] = rnd.choice((8, 16, 24, 32, 64, 128, 256)) * 2**30
    h["gpus"] = []
    if i % 5 == 4 and gpu_template and gpu_template.get("gpus"):
        g = json.loads(json.dumps(gpu_template["gpus"][0]))
        g["name"] = FLEET_GPUS[(i // 5) % len(FLEET_GPUS)]
        h["gpus"] = [g] * rnd.choice((1, 1, 2, 4, 8))
    h["id"] = f"fleet-{i:03d}-{_sha('fleet', i)[:8]}"
    h["name"] = f"fleet-{i:03d}"
    return h


def _scale_run(d: dict[str, Any], f: float) -> None:
    """Scale a rate run's measured speed by ``f`` (samples, their summary, llama.cpp's own counters)."""
    for m in HEADLINE_SCALED:
        s = (d.get("summary") or {}).get(m)
        if not s:
            continue
        for k, v in list(s.items()):
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "n":
                s[k] = v * f
    samples = d.get("samples") or {}
    if isinstance(samples.get("ts"), list):
        samples["ts"] = [x * f for x in samples["ts"]]
    if isinstance(samples.get("ns"), list):
        samples["ns"] = [max(1, int(x / f)) for x in samples["ns"]]
    det = d.get("details") or {}
    if isinstance(det.get("perf_counter_ts"), list):
        det["perf_counter_ts"] = [x * f for x in det["perf_counter_ts"]]


def fleet_speed(i: int, gpu: bool) -> float:
    import random

    rnd = random.Random(f"speed-{i}")
    return (10 ** rnd.uniform(1.0, 1.8)) if gpu else (10 ** rnd.uniform(-0.3, 0.6))


def fleet_templates(
    base: list[dict[str, Any]], every_kind: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any] | None]:
    """The committed CPU host's reference runs (the workload every fleet host runs), its probe, and a GPU
    host block to copy GPUs from. ``every_kind``: every ok run of the committed CPU host with the most runs
    and a probe (rate, chat, generate, serve, concurrency, ...: a fleet sharing its nightly matrices)."""
    probed = {
        d["host"]["id"]
        for d in base
        if d["artifact"] == "host" and not d["host"].get("gpus")
    }
    if every_kind:
        runs = [
            d
            for d in base
            if d["artifact"] == "run"
            and d["status"] == "ok"
            and d["host"]["id"] in probed
        ]
        cpu_host = max(
            sorted(probed), key=lambda h: sum(1 for d in runs if d["host"]["id"] == h)
        )
        refs = sorted(
            (d for d in runs if d["host"]["id"] == cpu_host),
            key=lambda d: (d["model"]["name"], d["test"]["name"], d["id"]),
        )
        # and its quality runs: a nightly matrix scores the models too
        refs += sorted(
            (
                d
                for d in base
                if d["artifact"] == "quality"
                and d["status"] == "ok"
                and d["host"]["id"] == cpu_host
            ),
            key=lambda d: (d["model"]["name"], d["suite"]["name"], d["id"]),
        )
        probe = next(
            d for d in base if d["artifact"] == "host" and d["host"]["id"] == cpu_host
        )
        gpu_run = next(
            (d for d in base if d["artifact"] == "run" and d["host"].get("gpus")), None
        )
        return refs, probe, (gpu_run["host"] if gpu_run else None)
    refs = [
        d
        for d in base
        if d["artifact"] == "run"
        and (d.get("matrix") or {}).get("name") == "reference"
        and d["status"] == "ok"
        and not d["host"].get("gpus")
    ]
    cpu_host = refs[0]["host"]["id"]
    refs = sorted(
        (d for d in refs if d["host"]["id"] == cpu_host),
        key=lambda d: (d["model"]["name"], d["test"]["name"]),
    )
    probe = next(
        d for d in base if d["artifact"] == "host" and d["host"]["id"] == cpu_host
    )
    gpu_run = next(
        (d for d in base if d["artifact"] == "run" and d["host"].get("gpus")), None
    )
    return refs, probe, (gpu_run["host"] if gpu_run else None)


def fleet_artifacts(
    base: list[dict[str, Any]], hosts: int, skip: Any = None, every_kind: bool = False
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path under data/, artifact) of a fleet without end: a probe per host, then rounds of the reference
    workload (``every_kind``: of every configuration of every kind a committed CPU host ran), each
    configuration across every host before the next. ``skip(host_index, template_index)`` leaves a host's
    configuration out (a host that ran part of the workload)."""
    import random

    refs, probe, gpu_host = fleet_templates(base, every_kind)
    fleet = [fleet_host(i, refs[0]["host"], gpu_host) for i in range(hosts)]
    newest = max(datetime.fromisoformat(d["created"]) for d in refs)
    for h in fleet:  # one probe per host
        doc = json.loads(json.dumps(probe))
        doc.pop("_file", None)
        doc["host"] = h
        doc["created"] = newest.isoformat(timespec="seconds")
        doc["id"] = f"{h['id']}-{_stamp(newest, False)}"
        yield f"hosts/{h['id']}/bandwidth-{_stamp(newest, False)}.json", doc
    rnd = random.Random(0)
    rnd_round = 0
    while True:
        for t_i, t in enumerate(refs):
            for i, h in enumerate(fleet):
                if skip is not None and skip(i, t_i):
                    continue
                doc = json.loads(json.dumps(t))
                doc.pop("_file", None)
                doc["host"] = h
                created = datetime.fromisoformat(t["created"]) - timedelta(
                    days=rnd_round, seconds=-(i % 60)
                )
                doc["created"] = created.isoformat(timespec="seconds")
                _scale_run(
                    doc, fleet_speed(i, bool(h["gpus"])) * (1 + rnd.gauss(0, 0.02))
                )
                doc["key"] = _sha(
                    t["key"], h["id"]
                )  # this host's configuration: the same on every round
                yield fleet_doc(doc, h, created)
        rnd_round += 1


def fleet_doc(
    doc: dict[str, Any], h: dict[str, Any], created: datetime
) -> tuple[str, dict[str, Any]]:
    """A fleet host's copy of a template run (or quality run): its id, and its path in data/."""
    if doc["artifact"] == "quality":
        doc["id"] = f"q{doc['key'][:12]}-{_stamp(created, True)}"
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", doc["suite"]["name"])
        rel = (
            f"quality/{h['id']}/{slug(doc['model']['name'])}/{safe}"
            f"--{doc['key'][:16]}-{doc['id'].split('-', 1)[1]}.json"
        )
        return rel, doc
    from core.records.run import run_path

    doc["id"] = f"{doc['key'][:12]}-{_stamp(created, True)}"
    return run_path(doc, Path("runs")).as_posix(), doc


def new_host_reference(
    base: list[dict[str, Any]], i: int, days_later: int = 1
) -> list[tuple[str, dict[str, Any]]]:
    """One more fleet host (index ``i``): its probe and one reference run of each reference
    configuration, a day after the newest template (what a new host's first nightly run adds)."""
    refs, probe, gpu_host = fleet_templates(base, False)
    h = fleet_host(i, refs[0]["host"], gpu_host)
    newest = max(datetime.fromisoformat(d["created"]) for d in refs) + timedelta(
        days=days_later
    )
    doc = json.loads(json.dumps(probe))
    doc.pop("_file", None)
    doc["host"], doc["created"] = h, newest.isoformat(timespec="seconds")
    doc["id"] = f"{h['id']}-{_stamp(newest, False)}"
    out = [(f"hosts/{h['id']}/bandwidth-{_stamp(newest, False)}.json", doc)]
    for t in refs:
        d = json.loads(json.dumps(t))
        d.pop("_file", None)
        d["host"], d["created"] = h, newest.isoformat(timespec="seconds")
        _scale_run(d, fleet_speed(i, bool(h["gpus"])))
        d["key"] = _sha(t["key"], h["id"])
        out.append(fleet_doc(d, h, newest))
    return out


def make_fleet_data(
    dest: Path,
    n: int,
    base: list[dict[str, Any]],
    hosts: int,
    every_kind: bool = False,
) -> int:
    """The project's inputs, the committed set, then ``hosts`` fleet hosts running the reference workload."""
    shutil.copytree(
        ROOT / "data",
        dest,
        ignore=lambda d, names: [
            x for x in names if Path(d) == ROOT / "data" and x in ARTIFACT_DIRS
        ],
    )
    written = 0
    for d in base:
        if written >= n:
            break
        (dest / d["_file"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "data" / d["_file"], dest / d["_file"])
        written += 1
    for rel, doc in fleet_artifacts(base, hosts, every_kind=every_kind):
        if written >= n:
            break
        artifacts.write(dest / rel, doc)
        written += 1
    return written


def committed() -> list[dict[str, Any]]:
    docs = []
    for path in artifacts.iter_files(ROOT / "data"):
        doc = artifacts.load(path)
        doc["_file"] = str(path.relative_to(ROOT / "data"))
        docs.append(doc)
    return docs


def make_data(dest: Path, n: int, base: list[dict[str, Any]]) -> int:
    """The project's inputs plus ``n`` artifacts (committed ones first, then copies)."""
    shutil.copytree(
        ROOT / "data",
        dest,
        ignore=lambda d, names: [
            x for x in names if Path(d) == ROOT / "data" and x in ARTIFACT_DIRS
        ],
    )
    # the measurements and host fingerprints are copied; projections, go/no-go decisions and noise
    # estimates summarise a host's own runs: the originals stay
    copyable = [
        d
        for d in base
        if d["artifact"] in ("run", "quality", "perplexity", "host")
        and isinstance(d.get("host"), dict)
    ]
    written = 0
    for d in base:  # copy 0: the committed set as it is
        if written >= n:
            break
        (dest / d["_file"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "data" / d["_file"], dest / d["_file"])
        written += 1
    c = 1
    while written < n:
        for d in copyable:
            if written >= n:
                break
            doc, rel = variant(d, c)
            doc.pop("_file", None)
            artifacts.write(dest / rel, doc)
            written += 1
        c += 1
    return written


def timed(
    cmd: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and the peak summed RSS of the process tree (``timed.peak_pss``: its peak summed PSS,
    each page shared between processes counted once)."""
    import resource

    import psutil

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # output to files, not pipes: a build that prints more than a pipe holds must not block on it
    out_f, err_f = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=out_f, stderr=err_f, text=True
    )
    parent = psutil.Process(proc.pid)
    peak = peak_pss = 0
    while proc.poll() is None:
        total = total_pss = 0
        try:
            for p in [parent] + parent.children(recursive=True):
                try:
                    # RSS counts a page shared by a forked worker and the build in both; PSS shares it out
                    full = p.memory_full_info()
                    total += full.rss
                    total_pss += getattr(full, "pss", full.rss)
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, total)
        peak_pss = max(peak_pss, total_pss)
        time.sleep(
            0.1
        )  # sampling the tree costs CPU: often enough to see the (slowly growing) peak,
        # rarely enough not to slow 2 cores
    proc.wait()
    wall = time.perf_counter() - t0
    out_f.seek(0)
    err_f.seek(0)
    out, err = out_f.read(), err_f.read()
    out_f.close()
    err_f.close()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed.cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)  # type: ignore[attr-defined]
    timed.peak_pss = peak_pss  # type: ignore[attr-defined]
    return wall, peak, subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def page_sizes(site: Path) -> dict[str, Any]:
    pages = sorted(
        ((p.stat().st_size, str(p.relative_to(site))) for p in site.rglob("*.html")),
        reverse=True,
    )
    inline = []
    for _size, rel in pages[:10]:
        text = (site / rel).read_text(encoding="utf-8")
        data = sum(
            len(m)
            for m in re.findall(
                r'<script type="application/json"[^>]*>(.*?)</script>', text, flags=re.S
            )
        )
        inline.append((data, rel))
    from pipelines.site.browser import KINDS

    extra = {
        rel: (site / rel).stat().st_size
        for rel in (f"{k.folder}/index-data.js" for k in KINDS.values())
        if (site / rel).exists()
    }
    tables = (
        sorted(
            ((p.stat().st_size, p.name) for p in (site / "tables").glob("*")),
            reverse=True,
        )
        if (site / "tables").exists()
        else []
    )
    total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    # the published artifacts are hard links to data/ where the file system allows: counted apart
    mirror = (
        sum(p.stat().st_size for p in (site / "data").rglob("*") if p.is_file())
        if (site / "data").exists()
        else 0
    )
    return {
        "site_bytes": total,
        "site_bytes_without_data_mirror": total - mirror,
        "tables_bytes": sum(b for b, _ in tables),
        "largest_tables": [{"file": n, "bytes": b} for b, n in tables[:3]],
        "largest_pages": [{"page": rel, "bytes": size} for size, rel in pages[:5]],
        "largest_inline_chart_data": [
            {"page": rel, "bytes": b} for b, rel in sorted(inline, reverse=True)[:3]
        ],
        "html_pages": len(pages),
        "browser_indexes": extra,
    }


def build(data: Path, out: Path, cache: Path) -> dict[str, Any]:
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        ALMANAC_CACHE=str(cache),
        PYTHONPATH=str(ROOT),
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
    )
    load = (
        os.getloadavg()
    )  # how busy the machine was as the build started (1, 5, 15 minutes)
    wall, peak, proc = timed(
        [sys.executable, "-m", "invoke", "site.build", "--output", str(out)], env, ROOT
    )
    return {
        # what the build's site check found (almanac_tasks/site.py): a figure with two values, a host with
        # two names ... kept with the timing, so that a fast build of a wrong site is not a result
        "site_check": build_verdict(proc, data),
        "seconds": round(wall, 2),
        "cpu_s": round(timed.cpu, 2),  # type: ignore[attr-defined]
        "peak_mib": round(peak / 2**20, 1),
        "peak_pss_mib": round(timed.peak_pss / 2**20, 1),  # type: ignore[attr-defined]
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


_CHECK_CLEAN = "site check: every figure reads the same on every page"
_CHECK_FOUND = re.compile(
    r"^site check: ([\d,]+) contradiction\(s\) between pages:$", re.M
)


def build_verdict(proc: subprocess.CompletedProcess[str], data: Path) -> list[str]:
    """The site check's problems of a finished ``invoke site.build``. A build whose pages contradict each other
    exits 1 with the site built: a measurement, its problems listed; any other failure stops the script."""
    output = proc.stdout + proc.stderr
    if proc.returncode and not (proc.returncode == 1 and _CHECK_FOUND.search(output)):
        raise SystemExit(f"site build failed at {data}:\n{proc.stderr[-3000:]}")
    return site_check(output)


def site_check(output: str) -> list[str]:
    """What the site check said of a build (its output): [] when the site agrees with itself, else every problem
    it listed, one line each; a build whose output holds no site check's verdict is a failed measurement."""
    m = _CHECK_FOUND.search(output)
    if m is None:
        if _CHECK_CLEAN not in output:
            raise SystemExit("the site build printed no site check's verdict")
        return []
    lines = output[m.end() :].splitlines()[1:]
    return [ln.strip() for ln in lines[: int(m.group(1).replace(",", ""))]]


def all_noop(data: Path, cache: Path, out: Path) -> dict[str, Any]:
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        ALMANAC_CACHE=str(cache),
        PYTHONPATH=str(ROOT),
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
    )
    # the site goes to the default site/ of the working tree, as `invoke all` does
    wall, peak, proc = timed([sys.executable, "-m", "invoke", "all"], env, ROOT)
    if proc.returncode:
        raise SystemExit(f"invoke all failed:\n{proc.stderr[-3000:]}")
    measured = re.findall(
        r"(\d+) measured, (\d+) failed, (\d+) already measured", proc.stdout
    )
    return {
        "seconds": round(wall, 2),
        "cpu_s": round(timed.cpu, 2),  # type: ignore[attr-defined]
        "peak_mib": round(peak / 2**20, 1),
        "bench": measured,
    }


def _say_check(n: int, kind: str, result: dict[str, Any]) -> None:
    """The site check's problems of one timed build, printed under its timing line (nothing when none)."""
    found = result["site_check"]
    if found:
        print(
            f"N={n:>6}: {kind}: the site check found {len(found):,} problem(s):",
            flush=True,
        )
        for line in found:
            print(f"  {line}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes", default="100,1000,10000", help="comma-separated artifact counts"
    )
    ap.add_argument(
        "--mode",
        choices=("copies", "fleet"),
        default="copies",
        help="copies: every copy its own host variant and model (hosts share no work); "
        "fleet: --hosts hosts running the same reference workload",
    )
    ap.add_argument("--hosts", type=int, default=200, help="fleet mode: how many hosts")
    ap.add_argument(
        "--every-kind",
        action="store_true",
        help="fleet mode: every host runs every configuration of every kind a committed CPU host "
        "ran (rate, chat, generate/agent loops, serve, concurrency, quality: 85), not only the reference workload",
    )
    ap.add_argument(
        "--incremental",
        action="store_true",
        help="fleet mode: after the cold and warm builds, add one more host's reference run "
        "(its probe and the reference configurations) and time the rebuild",
    )
    ap.add_argument(
        "--all-noop",
        type=int,
        default=0,
        help="also time `invoke all` with nothing new at this many artifacts",
    )
    ap.add_argument(
        "--scratch",
        default="",
        help="scratch folder (default: a temporary one, removed after)",
    )
    ap.add_argument("--out", default="", help="write the results as JSON here")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="keep a data folder already in --scratch (e.g. one where "
        "`invoke all` already measured this host's default matrix, so a second one has nothing new)",
    )
    ap.add_argument(
        "--generate-only",
        action="store_true",
        help="write the data folders into --scratch and stop "
        "(then measure them with --reuse under the exclusive lock, generation left outside it)",
    )
    ap.add_argument(
        "--builds",
        default="cold,warm",
        help="which builds to time, in order (cold: an empty validation cache; warm: the cache the last "
        "build left); split them over several calls with --scratch and --reuse to keep each call short",
    )
    args = ap.parse_args()
    builds = [b.strip() for b in args.builds.split(",") if b.strip()]
    bad = [b for b in builds if b not in ("cold", "warm")]
    if bad:
        ap.error(f"--builds: unknown build(s) {', '.join(bad)} (known: cold, warm)")
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="almanac-scale-"))
    base = committed()
    results: dict[str, Any] = {
        "command": "python " + " ".join(sys.argv),
        "mode": args.mode,
        "committed_artifacts": len(base),
        "cpu_count": os.cpu_count(),
        "sizes": [],
    }
    if args.mode == "fleet":
        results["hosts"] = args.hosts
        results["every_kind"] = args.every_kind
    try:
        for n in sizes:
            data = scratch / f"data-{n}"
            t0 = time.perf_counter()
            if args.reuse and data.exists():
                written = sum(1 for _ in artifacts.iter_files(data))
            else:
                shutil.rmtree(data, ignore_errors=True)
                written = (
                    make_fleet_data(data, n, base, args.hosts, args.every_kind)
                    if args.mode == "fleet"
                    else make_data(data, n, base)
                )
            gen = time.perf_counter() - t0
            if args.generate_only:
                print(f"N={written}: generated in {gen:.1f} s at {data}", flush=True)
                continue
            os.sync()  # the generated files on disk before timing: no writeback competes with the build
            cache = scratch / f"cache-{n}"
            site = scratch / f"site-{n}"
            row: dict[str, Any] = {"artifacts": written, "generated_s": round(gen, 1)}
            for kind in builds:
                if kind == "cold":
                    shutil.rmtree(cache, ignore_errors=True)
                row[kind] = build(data, site, cache)
                print(
                    f"N={written:>6}: {kind} {row[kind]['seconds']:.2f} s (cpu {row[kind]['cpu_s']:.1f} s), "
                    f"{row[kind]['peak_mib']:.1f} MiB peak RSS, {row[kind]['peak_pss_mib']:.1f} MiB peak PSS",
                    flush=True,
                )
                _say_check(written, kind, row[kind])
            if builds:
                row.update(page_sizes(site))
            if args.incremental:
                added = new_host_reference(base, args.hosts)
                for rel, doc in added:
                    artifacts.write(data / rel, doc)
                os.sync()
                try:
                    row["incremental"] = build(data, site, cache)
                finally:  # the data folder as it was: a reused folder measures the same set next time
                    for rel, _doc in added:
                        (data / rel).unlink(missing_ok=True)
                row.setdefault("largest_pages", page_sizes(site)["largest_pages"])
                print(
                    f"N={written:>6}: after one more host's reference run, rebuild "
                    f"{row['incremental']['seconds']:.2f} s (cpu {row['incremental']['cpu_s']:.1f} s), "
                    f"{row['incremental']['peak_mib']:.1f} MiB peak RSS, "
                    f"{row['incremental']['peak_pss_mib']:.1f} MiB peak PSS",
                    flush=True,
                )
                _say_check(written, "incremental", row["incremental"])
            results["sizes"].append(row)
            if "site_bytes" in row:
                print(
                    f"N={written:>6}: largest page {row['largest_pages'][0]['page']} "
                    f"{row['largest_pages'][0]['bytes'] / 1024:.0f} KiB; largest table "
                    f"{(row['largest_tables'] or [{'bytes': 0}])[0]['bytes'] / 1024:.0f} KiB; "
                    f"site {row['site_bytes'] / 2**20:.1f} MiB "
                    f"({row['site_bytes_without_data_mirror'] / 2**20:.1f} MiB without the data mirror)",
                    flush=True,
                )
            shutil.rmtree(site, ignore_errors=True)
        if len(results["sizes"]) >= 2:
            a, b = results["sizes"][0], results["sizes"][-1]
            for k in (k for k in ("cold", "warm") if k in a and k in b):
                per = (
                    (b[k]["seconds"] - a[k]["seconds"])
                    / (b["artifacts"] - a["artifacts"])
                    * 1000
                )
                results[f"per_artifact_ms_{k}"] = round(per, 2)
                print(f"marginal cost per artifact ({k}): {per:.2f} ms")
        if args.all_noop:
            n = args.all_noop
            data = scratch / f"data-{n}"
            if not data.exists():
                make_data(data, n, base)
            cache = scratch / f"cache-{n}"
            first = all_noop(
                data, cache, scratch
            )  # may warm caches (model hash, validation)
            second = all_noop(data, cache, scratch)
            results["all_noop"] = {"artifacts": n, "first": first, "second": second}
            print(
                f"invoke all, nothing new, N={n}: {first['seconds']:.2f} s then {second['seconds']:.2f} s "
                f"({second['peak_mib']:.0f} MiB peak); bench: {second['bench']}"
            )
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
