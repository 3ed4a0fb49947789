"""The Hosts page: every host's fingerprint side by side, its measured memory bandwidth
(host RAM and, where there is one, the GPU's device memory), and its decode roofline
(measured tg rate against bandwidth ÷ bytes per token), each figure linked to the artifact
it comes from. Hosts that a remote run could not reach appear with what the inventory said.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from core.hostlabel import device_label, link_label
from core.records.host import GPU_MEMORY, HOST_MEMORY, HostRecord
from core.records.run import RunRecord
from pipelines import hostnames
from pipelines import roofline as roof
from pipelines.runs import latest_per_key
from pipelines.site import figures
from pipelines.site.markdown import (
    PROJECTED_BADGE,
    SYNTHETIC_BADGE,
    admonition,
    cell,
    code,
    link,
    nbytes,
    num,
    run_link,
    table,
)


def _gpu_text(g: dict[str, Any]) -> str:
    parts = [cell(device_label(g))]
    if g.get("compute_capability"):
        parts.append(f"CC {cell(g['compute_capability'])}")
    return " · ".join(parts)


def host_table(run_docs: list[RunRecord], host_docs: list[HostRecord]) -> str:
    """Fingerprints side by side: one column per host, one row per fact."""
    hosts: dict[str, dict[str, Any]] = {}
    builds: dict[str, dict[str, Any]] = {}
    ok: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    run_docs = list(run_docs)
    host_docs = [h for h in host_docs]
    for r in sorted(run_docs, key=lambda r: r.created):
        hosts[r.host_id] = r.host
        if r.ok:
            builds[r.host_id] = r.build
    for r in latest_per_key(run_docs):
        (ok if r.ok else failed)[r.host_id] += 1
    for h in host_docs:
        hosts.setdefault(h.host_id, h.host)
    if not hosts:
        return admonition(
            "warning",
            "No hosts yet",
            "Run `invoke bench` here, or `invoke bench --host NAME` on a host "
            "of data/hosts.yaml.",
        )
    ids = sorted(hosts)
    labels = hostnames.labels(run_docs + host_docs)

    def row(label: str, fn) -> list[str]:
        return [f"**{label}**"] + [fn(hosts[h], h) for h in ids]

    def gpus(h: dict[str, Any], _: str) -> str:
        return "<br>".join(_gpu_text(g) for g in h.get("gpus") or []) or "none"

    def gpu_fact(key: str, fmt=cell):
        return lambda h, _: (
            "<br>".join(
                fmt(g.get(key)) if g.get(key) is not None else "—"
                for g in h.get("gpus") or []
            )
            or "—"
        )

    def build(key: str):
        return lambda h, hid: (
            cell(builds.get(hid, {}).get(key))
            if builds.get(hid, {}).get(key) is not None
            else "—"
        )

    def source(h: dict[str, Any], _: str) -> str:
        if h.get("source") == "inventory":
            return "inventory only (never reached: hardware unknown)"
        return "fingerprint taken on the host"

    rows = [
        row("name", lambda h, _: cell(h.get("name"))),
        row("source", source),
        row("CPU", lambda h, _: cell(h["cpu"].get("model"))),
        row(
            "CPU signature",
            lambda h, _: cell(
                " · ".join(
                    f"{k} {v}" for k, v in (h["cpu"].get("signature") or {}).items()
                )
                or "— (not recorded)"
            ),
        ),
        row(
            "cores (physical / logical)",
            lambda h, _: cell(
                f"{h['cpu'].get('physical_cores')} / {h['cpu'].get('logical_cores')}"
            ),
        ),
        row(
            "RAM",
            lambda h, _: (
                nbytes(h.get("memory_bytes")) if h.get("memory_bytes") else "—"
            ),
        ),
        row(
            "CPU flags", lambda h, _: cell(" ".join(h["cpu"].get("flags") or [])) or "—"
        ),
        row("GPUs", gpus),
        row("GPU driver", gpu_fact("driver")),
        row("CUDA (driver)", gpu_fact("cuda")),
        row(
            "GPU datasheet bandwidth",
            gpu_fact(
                "datasheet_bandwidth_bytes_per_s", lambda v: f"{num(v / 1e9, 0)} GB/s"
            ),
        ),
        *_topology_rows(row, hosts, run_docs),
        row("OS", lambda h, _: cell((h.get("os") or {}).get("platform") or "—")),
        row("llama.cpp build", build("llama_cpp_commit")),
        row("libraries", build("libraries")),
        row(
            "runs (current: ok / failed)",
            lambda h, hid: f"{num(ok[hid], 0)} / {num(failed[hid], 0)}",
        ),
    ]
    return table(
        ["", *[f"{figures.host(labels.get(h, h), h)}<br>{code(h)}" for h in ids]],
        rows,
        ["l"] + ["l"] * len(ids),
    )


def _topology_rows(
    row, hosts: dict[str, dict[str, Any]], run_docs: list[RunRecord]
) -> list[list[str]]:
    """Rows for the GPUs a host's runs saw of the machine's, their PCI bus ids and links, the NUMA
    nodes, and the largest peak each GPU held in any run (issue 29); only where a fingerprint
    records them (older ones do not)."""
    out: list[list[str]] = []
    if any("gpus_on_host" in h for h in hosts.values()):

        def seen(h: dict[str, Any], _: str) -> str:
            n, on = len(h.get("gpus") or []), h.get("gpus_on_host")
            if on is None:
                return "—"
            env = f" ({cell(h['visible_devices'])})" if h.get("visible_devices") else ""
            return f"{num(n, 0)} of {num(on, 0)}{env}"

        out.append(row("GPUs visible to runs / on the machine", seen))
        out.append(
            row(
                "GPU PCI bus ids",
                lambda h, _: (
                    "<br>".join(
                        cell(g.get("pci_bus_id") or "—") for g in h.get("gpus") or []
                    )
                    or "—"
                ),
            )
        )
        out.append(
            row(
                "GPU links",
                lambda h, _: cell(link_label(h.get("gpu_links") or [])) or "—",
            )
        )
    if any(h.get("numa") for h in hosts.values()):

        def numa(h: dict[str, Any], _: str) -> str:
            # free-form host facts (no schema types them): a number is shown as one, anything else as text
            nodes = h.get("numa")
            nodes = (
                [n for n in nodes if isinstance(n, dict)]
                if isinstance(nodes, list)
                else []
            )

            def shown(v: Any, fmt: Any) -> str:
                is_num = isinstance(v, (int, float)) and not isinstance(v, bool)
                return fmt(v) if is_num else cell(v if v is not None else "—")

            return (
                "<br>".join(
                    f"node {shown(n.get('node'), lambda v: num(v, 0))}: CPUs {cell(n.get('cpus') or '—')}"
                    + (
                        f", {shown(n['memory_bytes'], nbytes)}"
                        if n.get("memory_bytes")
                        else ""
                    )
                    for n in nodes
                )
                or "—"
            )

        out.append(row("NUMA nodes", numa))
    peaks: dict[str, dict[int, int]] = {}
    for r in run_docs:
        for g in r.resources.peak_vram_by_gpu or []:
            i, b = g.get("index"), g.get("peak_bytes")
            if isinstance(i, int) and isinstance(b, int):
                cur = peaks.setdefault(r.host_id, {})
                cur[i] = max(cur.get(i, 0), b)
    if peaks:

        def used(h: dict[str, Any], hid: str) -> str:
            mine = peaks.get(hid)
            if not mine:
                return "—"
            gpus = h.get("gpus") or []
            return "<br>".join(
                f"GPU{i}: {nbytes(b)}"
                + (
                    f" of {nbytes(gpus[i]['memory_bytes'])}"
                    if i < len(gpus) and gpus[i].get("memory_bytes")
                    else ""
                )
                for i, b in sorted(mine.items())
            )

        out.append(row("largest peak per GPU (any run)", used))
    return out


def bandwidth_table(host_docs: list[HostRecord]) -> str:
    host_docs = [h for h in host_docs]
    labels = hostnames.labels(host_docs)
    rows = []
    for kind, what in ((HOST_MEMORY, "host RAM"), (GPU_MEMORY, "GPU memory")):
        for hid, b in sorted(roof.latest_bandwidth(host_docs, kind).items()):
            probe = next(d for d in host_docs if d.id == b.probe_id)
            device = probe.probe.get("device") or ""
            for pass_, entries in (
                ("read", probe.read_bandwidth),
                ("copy", probe.bandwidth),
            ):
                for e in entries:
                    s = e.summary
                    rows.append(
                        [
                            figures.host(labels.get(hid, hid), hid)
                            + "<br>"
                            + code(hid),
                            cell(what + (f" ({device})" if device else "")),
                            cell(pass_),
                            code(b.probe_id),
                            cell(b.created),
                            num(e.threads, 0),
                            num(s.median, 1),
                            num(s.mean, 1),
                            num(s.stddev, 1),
                            num(s.n, 0),
                            num(e.best, 1),
                        ]
                    )
    if not rows:
        return admonition(
            "note",
            "No bandwidth probe yet",
            "`invoke host.probe` measures host RAM; "
            "benchmarks/gpu_run.sh measures a GPU's device memory.",
        )
    return table(
        [
            "host",
            "memory",
            "pass",
            "probe artifact",
            "measured",
            "threads",
            "median GB/s",
            "mean GB/s",
            "± stddev",
            "n",
            "best GB/s",
        ],
        rows,
        ["l", "l", "l", "l", "l", "r", "r", "r", "r", "r", "r"],
    ) + (
        "\n\nread: bytes read per second by a read-only pass (what decode does; the roofline's bound where "
        "present); copy: bytes read plus written."
    )


def roofline_by_host(run_docs: list[RunRecord], host_docs: list[HostRecord]) -> str:
    rows_data = [r for r in roof.roofline_rows(run_docs, host_docs) if r.get("bound")]
    if not rows_data:
        return admonition(
            "note",
            "No bounded decode measurement yet",
            "A decode rate gets a bound once its host has a bandwidth probe.",
        )
    out = []
    labels = hostnames.labels(list(run_docs) + [h for h in host_docs])
    for hid in sorted({r["host_id"] for r in rows_data}):
        rows = []
        for r in sorted(
            (r for r in rows_data if r["host_id"] == hid),
            key=lambda r: (r["model"], r["test_name"]),
        ):
            memory = "GPU memory" if r.get("bound_by") == "gpu" else "host RAM"
            rows.append(
                [
                    cell(r["model"])
                    + (" " + SYNTHETIC_BADGE if r["synthetic"] else ""),
                    code(r["test_name"]),
                    nbytes(r["bytes"]["total"]),
                    cell(memory),
                    num(r["bound"], 0) + " " + PROJECTED_BADGE,
                    link(num(r["measured"], 1), run_link(r["id"])),
                    num(100 * r["efficiency"], 0) + " %",
                ]
            )
        out += [
            f"### {figures.host(labels.get(hid, hid), hid)} · {code(hid)}",
            "",
            table(
                [
                    "model",
                    "test",
                    "bytes read per token",
                    "bounded by",
                    "bound t/s",
                    "measured t/s",
                    "efficiency",
                ],
                rows,
                ["l", "l", "r", "l", "r", "r", "r"],
            ),
            "",
        ]
    return "\n".join(out)


def hosts_page(run_docs: list[RunRecord], host_docs: list[HostRecord]) -> str:
    return "\n".join(
        [
            "## Fingerprints",
            "",
            "Taken on each host when it ran (CPU, memory, GPUs through NVML: name, "
            "memory, driver, CUDA version, compute "
            "capability), so a figure is always read with the machine that produced it.",
            "",
            host_table(run_docs, host_docs),
            "",
            "## Memory bandwidth",
            "",
            "Measured by a large copy, counting bytes read plus bytes written: host RAM "
            "with CPU threads, a GPU's device "
            "memory with a device-to-device copy timed by CUDA events.",
            "",
            bandwidth_table(host_docs),
            "",
            "## Decode roofline",
            "",
            "Decoding reads every weight in use and the KV cache once per token, so a host cannot decode faster than "
            "bandwidth ÷ bytes per token (the bound, best bandwidth sample). Runs with "
            "every layer on a GPU are bounded by "
            "the GPU's memory, others by host RAM. Small models stay far below it: per-token kernel launches and "
            "synchronisation, not bytes, limit them.",
            "",
            roofline_by_host(run_docs, host_docs),
        ]
    )
