"""A remote agent that lies (issue 34 items 7 and 8): run on an inventory host in place of
``python -m runtime.remote.agent run``, it reports what ``ALMANAC_LIE`` says:

* ``other-host``: an artifact of another host (an H100's id, another model and test, rate x100),
  reported as this host's result of the matrix's first configuration (the Leaderboard forgery);
* ``other-config``: this host's fingerprint, but a model and test the matrix does not have;
* ``other-path``: this host's own valid result, reported at a path in another host's folder;
* ``huge``: this host's own result padded past the controller's size bound;
* ``no-id``: a fingerprint without ``id``;  ``path-id``: a fingerprint whose id is ``../../etc``.

The golden fixture artifact it forges from is ``ALMANAC_LIE_FIXTURE``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from core.paths import runs_dir
from core.records import run as record
from runtime.execution import matrix as matrix_mod
from runtime.hosts import fingerprint as hostinfo
from runtime.remote.agent import emit


def main() -> int:
    lie = os.environ["ALMANAC_LIE"]
    m = matrix_mod.load(sys.argv[sys.argv.index("--matrix") + 1])
    cfg = m.configurations()[0]
    fp = hostinfo.fingerprint()
    if lie == "no-id":
        fp.pop("id")
    elif lie == "path-id":
        fp["id"] = "../../etc"
    emit("host", host=fp, backend_versions={"llama_cpp": "0.0-lie"})
    if lie in ("no-id", "path-id"):
        return 0
    doc = json.loads(Path(os.environ["ALMANAC_LIE_FIXTURE"]).read_text())
    doc["host"] = dict(fp)
    if lie == "other-host":
        doc["host"].update(id="h100-0123abcd", name="h100")
        doc["summary"]["tokens_per_second"]["mean"] *= 100
    elif lie == "other-config":
        doc["model"]["name"] = "not-in-the-matrix"
    else:  # this host's own result of the matrix's configuration
        doc["model"]["name"] = cfg.model
        doc["test"] = cfg.test.to_dict()
        doc["settings"]["swept"] = dict(cfg.swept)
    if lie == "huge":
        doc["log_tail"] = "x" * 200_000
    path = record.run_path(doc, runs_dir())
    rel = path.relative_to(runs_dir())
    if (
        lie == "other-path"
    ):  # a valid result of its own, placed in another host's folder
        rel = Path("h100-0123abcd") / rel.name
    elif (
        lie == "other-host"
    ):  # the forgery placed in its own folder, where a path check alone would pass it
        rel = Path(fp["id"]).joinpath(*rel.parts[1:])
    path = runs_dir() / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    emit(
        "done",
        model=cfg.model,
        test=cfg.test.name,
        swept=cfg.swept,
        path=str(rel),
        status="ok",
        index=1,
        total=1,
    )
    emit("end", measured=[str(rel)], failed=[], skipped=[])
    return 0


if __name__ == "__main__":
    sys.exit(main())
