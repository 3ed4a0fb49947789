"""Decode roofline: how close each measured decode rate comes to the host's memory bandwidth.

Generating one token reads every weight in use once (for a MoE, only ``expert_used`` of
``expert_count`` experts; a tied token embedding in full as the output matrix) plus the KV
cache of the context so far. So

    bound (t/s) = bandwidth (bytes/s) ÷ bytes read per token,
    efficiency  = measured t/s ÷ bound.

Bytes per token come from the GGUF facts in the run artifact (``pipelines.memory``), at the
run's own cache types and flash-attention setting, averaged over the depths its generated
tokens saw. The bandwidth comes from the newest ``host`` artifact of the run's host
(``invoke host.probe``). Decode reads and does not write, so the bound uses the probe's
read-only pass (``read_bandwidth``) where it has one, and the copy (bytes read + written)
otherwise, saying so; the copy figure is kept beside it. The bound takes the best rate over
the probe's thread counts and repetitions (STREAM's convention: the best rate is the least
disturbed one), and the single-thread bound is shown beside it.

A model whose bytes per token (weights in use plus KV read) fit in the host's last-level
cache is not bound by memory bandwidth at all: its row is flagged, and its efficiency is
shown but not graded against the DRAM bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ModelError
from core.kinds.rate import RateTest
from core.records.host import (
    GPU_MEMORY,
    HOST_MEMORY,
    BandwidthEntry,
    HostRecord,
)
from core.records.run import RunRecord, flash_attention_on
from pipelines.memo import per_run
from pipelines.memory import (
    ModelShape,
    kv_cache,
    kv_read_bytes_sum,
    kv_rows,
)
from pipelines.runs import latest_per_key


def load_hosts(root: Path | None = None) -> list[HostRecord]:
    """Every host artifact under data/ (validated), oldest first, as typed records."""
    from pipelines.runs import load_artifacts

    return load_artifacts("host", root if root is None else Path(root))


@dataclass(frozen=True)
class Bandwidth:
    host_id: str
    probe_id: str
    created: str
    best_gbs: float  # best sample over every thread count, of the pass the bound uses
    best_threads: int
    single_gbs: float | None  # best single-thread sample
    rows: tuple[
        dict[str, Any], ...
    ]  # per thread count: threads, summary (a Summary), best
    load_before: float | None
    uses: str = "copy"  # "read" (read-only pass) or "copy" (bytes read + written; an older probe)
    copy_best_gbs: float | None = None  # the copy's best, kept beside a read bound
    read_best_gbs: float | None = None
    llc_bytes: int | None = None  # the host's last-level cache


def _rows(entries: list[BandwidthEntry]) -> list[dict[str, Any]]:
    return [
        {"threads": b.threads, "summary": b.summary, "best": b.best} for b in entries
    ]


def bandwidth_of(doc: HostRecord) -> Bandwidth:
    rec = doc
    copy_rows = _rows(rec.bandwidth)
    read_rows = _rows(rec.read_bandwidth)
    rows = read_rows or copy_rows
    best = max(rows, key=lambda r: r["best"])
    single = next((r["best"] for r in rows if r["threads"] == 1), None)
    return Bandwidth(
        rec.host_id,
        rec.id,
        rec.created,
        best["best"],
        best["threads"],
        single,
        tuple(rows),
        rec.loadavg_before,
        uses="read" if read_rows else "copy",
        copy_best_gbs=max(r["best"] for r in copy_rows),
        read_best_gbs=max((r["best"] for r in read_rows), default=None),
        llc_bytes=rec.llc_bytes,
    )


def latest_bandwidth(
    host_docs: list[HostRecord], kind: str = HOST_MEMORY
) -> dict[str, Bandwidth]:
    """The newest probe of each host, of one kind: host memory (default) or a GPU's device
    memory (``gpu_memory_bandwidth``, benchmarks/gpu_bandwidth.py)."""
    out: dict[str, Bandwidth] = {}
    for d in sorted(host_docs, key=lambda d: (d.created, d.id)):
        if d.probe_kind == kind:
            out[d.host_id] = bandwidth_of(d)
    return out


def _flash(eff: dict[str, Any], req: dict[str, Any]) -> bool:
    return flash_attention_on(req, eff)  # interpreted once, in core.records.run


def bytes_per_token(
    shape: ModelShape,
    depths: Depths | list[int],
    *,
    type_k: str = "f16",
    type_v: str = "f16",
    flash_attn: bool = True,
    expert_used: int | None = None,
    n_ctx: int | None = None,
    swa_full: bool = False,
) -> dict[str, float]:
    """Mean bytes read per decoded token over ``depths`` (the context length before each token)."""
    depths = Depths.of(depths)
    # a pure function of its arguments: runs of one model and test share it (the site asks for thousands)
    key = (
        repr(shape),
        depths,
        type_k,
        type_v,
        flash_attn,
        expert_used,
        n_ctx,
        swa_full,
    )
    hit = _BPT_CACHE.get(key)
    if hit is None:
        if len(_BPT_CACHE) > 4096:
            _BPT_CACHE.clear()
        hit = _BPT_CACHE[key] = _bytes_per_token(
            shape,
            depths,
            type_k,
            type_v,
            flash_attn,
            expert_used,
            n_ctx,
            swa_full,
        )
    return dict(hit)


_BPT_CACHE: dict[tuple, tuple[tuple[str, float], ...]] = {}


@dataclass(frozen=True)
class Depths:
    """The context depths a run's decoded tokens saw, as half-open ranges ``(start, stop)``: a run
    reporting 10^9 decoded tokens is one range, not 10^9 list items (issue 34: a token count of 10^7
    raised the build's peak memory from 173 MB to 1.3 GB; 10^9 ended it in MemoryError). Every
    figure over them (count, mean, bytes per token) is computed per range in closed form."""

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, depths: Depths | Iterable[int] | Iterable[range]) -> Depths:
        """From Depths, ranges, or plain depths (consecutive ones joined into a range)."""
        if isinstance(depths, Depths):
            return depths
        out: list[list[int]] = []
        for d in depths:
            if isinstance(d, range):
                if len(d) and d.step == 1:
                    out.append([d.start, d.stop])
                continue
            d = int(d)
            if out and out[-1][1] == d:
                out[-1][1] = d + 1
            else:
                out.append([d, d + 1])
        return cls(tuple((a, b) for a, b in out))

    @property
    def count(self) -> int:
        return sum(b - a for a, b in self.ranges)

    @property
    def min(self) -> int:
        return min(a for a, _ in self.ranges)

    @property
    def mean(self) -> float:
        return sum((a + b - 1) * (b - a) / 2 for a, b in self.ranges) / self.count

    def __bool__(self) -> bool:
        return bool(self.ranges)


def _bytes_per_token(
    shape: ModelShape,
    depths: Depths,
    type_k: str,
    type_v: str,
    flash_attn: bool,
    expert_used: int | None,
    n_ctx: int | None,
    swa_full: bool,
) -> tuple[tuple[str, float], ...]:
    weights = shape.weights_read_per_token(expert_used)
    cache = (
        kv_cache(
            shape,
            n_ctx or max(b for _, b in depths.ranges),
            type_k,
            type_v,
            swa_full=swa_full,
        )
        if not flash_attn
        else None
    )
    rows = kv_rows(shape, type_k, type_v)
    kv = (
        sum(
            kv_read_bytes_sum(
                shape,
                a,
                b,
                type_k,
                type_v,
                flash_attn=flash_attn,
                cache=cache,
                rows=rows,
            )
            for a, b in depths.ranges
        )
        / depths.count
    )
    return (
        ("weights", float(weights)),
        ("kv", float(kv)),
        ("total", float(weights + kv)),
    )


@per_run
def decode_point(doc: RunRecord) -> dict[str, Any] | None:
    """What a run measured about decoding: the depths its tokens saw and its decode rate (once per
    run: kept with it, read-only)."""
    rec = doc
    if not rec.ok:
        return None
    test = rec.spec
    if isinstance(test, RateTest):
        if not test.n_gen or test.n_prompt:
            return None  # prefill, or a mixed pp+tg rate: not a decode rate
        metric = "tokens_per_second"
        depths = Depths.of([range(test.n_depth, test.n_depth + test.n_gen)])
    else:
        metric = "decode_tps"
        spans = []
        for r in getattr(rec.samples, "requests", None) or []:
            p, o = r.prompt_tokens, r.output_tokens
            if p is None or not o:
                continue
            spans.append(
                range(int(p) + 1, int(p) + int(o))
            )  # tokens after the first (TPOT's)
        depths = Depths.of(spans)
    s = rec.stat(metric)
    if s is None or s.mean is None or not depths:
        return None
    return {"metric": metric, "stat": s, "depths": depths}


def roofline_rows(
    run_docs: list[RunRecord], host_docs: list[HostRecord]
) -> list[dict[str, Any]]:
    """One row per current decode measurement: bytes per token, bound, efficiency."""
    bw = latest_bandwidth(host_docs)
    gpu_bw = latest_bandwidth(host_docs, GPU_MEMORY)
    rows = []
    for rec in latest_per_key(run_docs):
        point = decode_point(rec)
        if point is None:
            continue
        eff = rec.reported
        req = rec.requested
        s = point["stat"]
        row: dict[str, Any] = {
            "id": rec.id,
            "created": rec.created,
            "host_id": rec.host_id,
            "model": rec.model_name,
            "synthetic": rec.synthetic,
            "test_name": rec.test_name,
            "metric": point["metric"],
            "measured": s.mean,
            "ci95_low": s.ci95_low,
            "ci95_high": s.ci95_high,
            "n": s.n,
            "threads": eff.get("n_threads"),
            "depth_mean": point["depths"].mean,
            "type_k": eff.get("type_k") or req.get("type_k") or "f16",
            "type_v": eff.get("type_v") or req.get("type_v") or "f16",
            "flash_attn": _flash(eff, req),
            "gpu": (eff.get("n_gpu_layers") or 0) > 0,
            "note": None,
        }
        full_gpu = row["gpu"] and eff.get("n_gpu_layers") == eff.get("n_layers_total")
        # a GPU host's run whose backend reported no n_gpu_layers (an HTTP server: what was asked is not what
        # ran): where its layers ran is unknown, so neither the host's nor the GPU's bandwidth bounds it
        layers_unknown = bool(rec.gpus) and eff.get("n_gpu_layers") is None
        if row["gpu"] and not (full_gpu and rec.host_id in gpu_bw):
            row["note"] = "layers on a GPU: the host-memory probe does not bound it"
        if (
            not rec.has_local_file
        ):  # an endpoint model: the server reports no weight bytes to bound it by
            row.update(
                bytes=None,
                note=f"endpoint model ({rec.model_origin}): no local file, so no weight bytes "
                "per token: skipped",
            )
            rows.append(row)
            continue
        if str(eff.get("weights") or "").startswith(
            "dequantized"
        ):  # e.g. transformers: not the file's bytes
            row.update(
                bytes=None,
                note=f"weights {eff['weights']} in memory: the file's bytes per token do not bound it",
            )
            rows.append(row)
            continue
        try:
            shape = ModelShape.from_facts(rec.gguf, rec.model_name)
            expert_used = eff.get("n_expert_used")
            b = bytes_per_token(
                shape,
                point["depths"],
                type_k=row["type_k"],
                type_v=row["type_v"],
                flash_attn=row["flash_attn"],
                expert_used=expert_used,
                n_ctx=eff.get("n_ctx"),
                swa_full=bool(eff.get("swa_full", req.get("swa_full", False))),
            )
        except ModelError as exc:
            row.update(bytes=None, note=exc.detail)
            rows.append(row)
            continue
        row["bytes"] = b
        row["notes_shape"] = list(shape.notes)
        probe = bw.get(rec.host_id)
        if (
            full_gpu and rec.host_id in gpu_bw
        ):  # every layer on the GPU: its device memory bounds it
            probe = gpu_bw[rec.host_id]
            row["bound_by"] = "gpu"
        row["probe"] = probe
        row["fits_llc"] = bool(
            probe is not None
            and probe.llc_bytes
            and b["total"] <= probe.llc_bytes
            and row.get("bound_by") != "gpu"
        )
        if (
            row["fits_llc"] and probe is not None and probe.llc_bytes
        ):  # (fits_llc says so)
            row["note"] = (
                f"weights in use and KV ({b['total'] / 2**20:.1f} MiB per token) fit in the "
                f"{probe.llc_bytes / 2**20:.0f} MiB last-level cache: not bound by memory bandwidth"
            )
        if layers_unknown:
            row.update(
                bound=None,
                bound_single=None,
                efficiency=None,
                efficiency_single=None,
                note="the server did not report n_gpu_layers on a host with a GPU (requested: "
                f"{req.get('n_gpu_layers', 'not set')}): where its layers ran is unknown, so no bandwidth "
                "bound applies",
            )
        elif probe is not None and (not row["gpu"] or row.get("bound_by") == "gpu"):
            row["bound_uses"] = probe.uses
            row["bound_copy"] = (
                probe.copy_best_gbs * 1e9 / b["total"] if probe.copy_best_gbs else None
            )
            row["efficiency_copy"] = (
                row["measured"] / row["bound_copy"] if row["bound_copy"] else None
            )
            row["bound"] = probe.best_gbs * 1e9 / b["total"]
            row["bound_single"] = (
                probe.single_gbs * 1e9 / b["total"] if probe.single_gbs else None
            )
            row["efficiency"] = row["measured"] / row["bound"]
            row["efficiency_single"] = (
                row["measured"] / row["bound_single"] if row["bound_single"] else None
            )
        else:
            row.update(
                bound=None, bound_single=None, efficiency=None, efficiency_single=None
            )
            if probe is None and not row["gpu"]:
                row["note"] = (
                    "no host probe for this host: run `invoke host.probe` there"
                )
        rows.append(row)
    return rows
