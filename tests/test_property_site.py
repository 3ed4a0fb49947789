"""One notion of valid: whatever `invoke validate` accepts, every page renders.

Hypothesis generates artifacts of every type within their schemas (tests/support/schema_gen.py:
drawn from the schema alone, and real artifacts with values replaced by anything the schema still
accepts), checks that the loader accepts each, and builds the whole site from them, strictly, in a
child process: it must build, with no traceback. An example is a whole data folder (a site build
takes seconds), so the examples are few and not shrunk; ALMANAC_PROPERTY_EXAMPLES runs more, and
ALMANAC_PROPERTY_EXPLORE=1 draws new ones instead of the fixed ones the test command runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from core import artifacts
from tests.conftest import FIXTURES, build_site, make_golden_data
from tests.support import committed, schema_gen

EXAMPLES = int(
    os.environ.get("ALMANAC_PROPERTY_EXAMPLES", "3")
)  # each example draws every artifact type and builds a site
# The test command draws the same examples every time (a red suite must mean the code changed, not the
# dice); ALMANAC_PROPERTY_EXPLORE=1 draws new ones: the nightly job in .github/workflows/test.yml explores
# with many examples, and a failure it finds prints the @reproduce_failure line to pin it.
EXPLORE = os.environ.get("ALMANAC_PROPERTY_EXPLORE") == "1"
GENERATED_EXAMPLES = int(
    os.environ.get("ALMANAC_PROPERTY_GENERATED", "0")
)  # the generator checked on its own (slow: ~90 s an example)
DRAWN_PER_TYPE = 2  # documents drawn from the schema alone (kept when valid)
MUTATED_PER_TYPE = 5  # real documents with values replaced
EDITS = 8  # at most this many replacements in one real document


def _sources() -> dict[str, list[dict]]:
    """Real artifacts of every type to mutate: the golden fixtures, the optimization fixtures and the
    committed measurements (read, never written)."""
    out: dict[str, list[dict]] = {}
    files = [
        *artifacts.iter_files(FIXTURES / "data"),
        *artifacts.iter_files(FIXTURES / "optimization"),
        *committed.committed_paths(""),
    ]
    for p in files:
        doc = artifacts.load(p)
        out.setdefault(doc["artifact"], []).append(doc)
    return out


SOURCES = _sources()
_DIGIT = re.compile(r"(\d)(?=(\.\d{3})?Z$)")


def _fresh_id(doc: dict, n: int, taken: set[str]) -> dict | None:
    """``doc`` under an id (and key) no other document of the set has, in the id's own form."""
    for k in range(1, 10):
        m = _DIGIT.search(doc["id"])
        if m is None:
            return None
        ident = (
            doc["id"][: m.start()]
            + str((int(m.group(1)) + k + n) % 10)
            + doc["id"][m.end() :]
        )
        if ident not in taken:
            out = dict(doc, id=ident)
            if "key" in out:
                out["key"] = hashlib.sha256(
                    f"{doc['key']}|{n}|{k}".encode()
                ).hexdigest()
            return out if schema_gen.valid(out) else None
    return None


@st.composite
def data_folder(draw: st.DrawFn) -> list[dict]:
    """Documents of every artifact type, each one validate accepts, ids unique across the set."""
    docs: list[dict] = []
    taken = {d["id"] for ds in SOURCES.values() for d in ds}
    for name in sorted(artifacts.ARTIFACT_TYPES):
        drawn = [
            d
            for d in draw(st.lists(schema_gen.candidate(name), max_size=DRAWN_PER_TYPE))
            if schema_gen.valid(d)
        ]
        pool = SOURCES.get(name, [])
        if pool:
            for i in range(MUTATED_PER_TYPE):
                src = draw(st.sampled_from(pool))
                m = _fresh_id(
                    draw(schema_gen.mutated(src, max_edits=EDITS)), len(docs) + i, taken
                )
                if m is not None:
                    drawn.append(m)
        for d in drawn:
            if d["id"] not in taken:
                taken.add(d["id"])
                docs.append(d)
    return _one_machine_per_host(docs)


def _one_machine_per_host(docs: list[dict]) -> list[dict]:
    """The set with no host id claimed by two machines (a set rule of the loader, core.hostid): a
    document whose mutated fingerprint differs from another's under its id gets an id of its own."""
    from core import hostid

    seen: dict[str, dict] = {}
    for base in (
        FIXTURES / "data",
    ):  # the golden artifacts the test builds beside the drawn ones
        for p in artifacts.iter_files(base):
            fp = artifacts.load(p).get("host")
            if isinstance(fp, dict) and isinstance(fp.get("cpu"), dict):
                seen.setdefault(fp["id"], fp)
    out = []
    for d in docs:
        fp = d.get("host")
        if (
            isinstance(fp, dict)
            and isinstance(fp.get("id"), str)
            and isinstance(fp.get("cpu"), dict)
        ):
            ident, n = fp["id"], 0
            while ident in seen and hostid.differing_fact(seen[ident], fp) is not None:
                n += 1
                ident = f"{hostid.host_id(fp)}-{n}" if n > 1 else hostid.host_id(fp)
            if ident != fp["id"]:
                d = dict(d, host=dict(fp, id=ident))
            seen.setdefault(ident, d["host"])
        out.append(d)
    return out


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    derandomize=not EXPLORE,
    suppress_health_check=list(HealthCheck),
)
@given(docs=data_folder())
def test_any_valid_artifacts_build_the_site(docs):
    tmp = Path(tempfile.mkdtemp(prefix="almanac-property-"))
    data = make_golden_data(tmp / "data")
    for i, d in enumerate(docs):
        artifacts.write(
            data / "generated" / f"{d['artifact']}-{i:03d}.json", d
        )  # validated on the way: valid by construction
    proc = build_site(data, tmp / "site")
    text = proc.stdout + proc.stderr
    ok = proc.returncode == 0 and "Traceback" not in text
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    assert ok, f"site build from {data} failed (kept for a look):\n{text[-6000:]}"


@pytest.mark.skipif(
    GENERATED_EXAMPLES == 0,
    reason="the schema generator's own check is slow (about 90 s an example): "
    "ALMANAC_PROPERTY_GENERATED=N runs it",
)
@settings(
    max_examples=max(1, GENERATED_EXAMPLES),
    deadline=None,
    database=None,
    phases=[Phase.generate],
    derandomize=not EXPLORE,
    suppress_health_check=list(HealthCheck),
)
@given(st.data())
def test_generated_documents_are_valid_and_varied(data):
    """(Run with ALMANAC_PROPERTY_GENERATED=N: drawing every type from its schema costs about 90 s an
    example on 2 cores since the run schema carries ten kinds; the site test above draws them too.)
    The generator's documents are ones validate accepts (drawn ones, after the schema's cross-field
    rules, and mutated real ones), and mutations reach the fields the pages branch on."""
    for name in sorted(artifacts.ARTIFACT_TYPES):
        artifacts.validate(data.draw(schema_gen.candidate(name), label=name))
    run = data.draw(
        schema_gen.mutated(SOURCES["run"][0], max_edits=EDITS), label="mutated run"
    )
    artifacts.validate(run)
