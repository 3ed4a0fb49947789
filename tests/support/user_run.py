"""A user's own measurements, planted: what `invoke all` on a new host adds to data/ (issue 28).

``plant_user_measurements(data, source)`` writes under ``data`` what `invoke all` leaves there on a new
host, made from committed artifacts under ``source``: the newest ok run of every configuration of the
default and reference matrices (each from the committed CPU host with the most runs of it) on one
new host (id and name changed, one fingerprint), with new keys and ids, a month later, hostile text in
a setting of the first; and the probes (bandwidth, noise) of those hosts under the new id. They are written through
core.artifacts, which validates them: they are valid artifacts, as a user's are.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

USER_HOST = "vm-newuser-1234abcd"
HOSTILE = "<script>alert('zq-user')</script>](javascript:alert('zq-user'))"
MATRICES = (
    "default",
    "reference",
)  # what `invoke all` runs (almanac_tasks/workflow.py ALL_MATRICES)


def plant_user_measurements(
    data: Path, source: Path, host_id: str = USER_HOST
) -> dict[str, list[Path]]:
    """Plant a new host's runs and probes under ``data``, made from the committed artifacts under
    ``source`` (a committed data folder). Returns {"runs": [...], "hosts": [...]} (the files written)."""
    from core import artifacts
    from core.records import run as record

    def load(folder: Path) -> list[dict]:
        docs = [
            {
                k: v for k, v in artifacts.load(p).items() if not k.startswith("_")
            }  # migrated to today's version
            for p in artifacts.iter_files(folder)
        ]
        return sorted(docs, key=lambda d: (d["created"], d["id"]))

    def matrix(d: dict) -> str | None:
        return (d.get("matrix") or {}).get("name")

    cpu_runs = [
        d
        for d in load(source / "runs")
        if d["artifact"] == "run"
        and d["status"] == "ok"
        and not d["host"].get("gpus")
        and matrix(d) in MATRICES
    ]
    newest: dict[tuple, dict] = {}
    for (
        name
    ) in MATRICES:  # each matrix from the committed CPU host with the most runs of it
        hosts = [d["host"]["id"] for d in cpu_runs if matrix(d) == name]
        for d in cpu_runs:
            if (
                hosts
                and matrix(d) == name
                and d["host"]["id"] == max(dict.fromkeys(hosts), key=hosts.count)
            ):
                newest[(name, d["model"].get("name"), d["test"]["name"])] = d
    chosen = sorted(newest.values(), key=lambda d: (d["created"], d["id"]))
    fingerprint = {
        **chosen[0]["host"],
        "id": host_id,
        "name": "newuser",
    }  # one machine: one fingerprint
    written: dict[str, list[Path]] = {"runs": [], "hosts": []}
    for i, old in enumerate(chosen):
        doc = copy.deepcopy(old)
        doc["host"] = fingerprint
        doc["key"] = hashlib.sha256(f"{old['key']}|{host_id}".encode()).hexdigest()[
            : len(old["key"])
        ]
        # later than the committed run it copies, never ahead of the clock (validation refuses that)
        now = datetime.now(UTC).replace(microsecond=0)
        created = min(
            datetime.fromisoformat(old["created"]) + timedelta(days=30),
            now - timedelta(minutes=len(chosen) - i),
        )
        doc["created"] = created.isoformat(timespec="seconds")
        doc["id"] = record.run_id(doc["key"], created)
        if i == 0:  # a user's own setting, hostile
            doc["settings"]["requested"]["chat_format"] = HOSTILE
        written["runs"].append(record.write(doc, data / "runs"))
    for old_host in dict.fromkeys(d["host"]["id"] for d in chosen):
        for p in artifacts.iter_files(source / "hosts" / old_host):
            doc = {k: v for k, v in artifacts.load(p).items() if not k.startswith("_")}
            # the artifact's own id names its host as the file it was copied from did (the id was kept when that
            # host was re-identified): a copy for another host gets that host's id in its own
            stamp = doc["id"].rsplit("-", 1)[1]
            doc["host"], doc["id"] = fingerprint, f"{host_id}-{doc['artifact']}-{stamp}"
            written["hosts"].append(
                artifacts.write(data / "hosts" / host_id / p.name, doc)
            )
    return written
