"""Which lane a test runs in (issue 28): one rule, applied at collection by tests/conftest.py.

* ``fast``: pure functions and golden pages, in process; the default lane of a quick check
  (`invoke test --lane fast`, under 2 minutes on 2 cores).
* ``integration``: real parts of this machine but no model and no browser: site builds (mkdocs),
  `invoke` and script subprocesses, HTTP servers on loopback, the sandbox.
* ``e2e``: end to end with the real embedded model, a real llama.cpp server, sshd or Chromium.
* ``timing`` (marker set by the test itself): the verdict depends on how busy the machine is;
  reported, never gating (`invoke test --lane timing --report`).

The rule, first match wins: a lane marker the test sets itself; ``timing``; the ``model`` or
``browser`` marker or an end-to-end fixture -> e2e; a module listed below or an integration
fixture -> integration; otherwise fast. A new test module is fast until it is listed here, and
tests/test_lanes.py fails when a fast-lane module starts a process or builds a site.
"""

from __future__ import annotations

import pytest

LANES = ("fast", "integration", "e2e", "timing")

#: Fixtures that bring up something end to end (the real model, sshd, a browser).
E2E_FIXTURES = frozenset(
    {"embedded_model", "sshd_env", "gemma", "tiny_model", "served"}
)
#: Fixtures that build a site or start a server or subprocess.
INTEGRATION_FIXTURES = frozenset(
    {
        "built_site",
        "committed_site",
        "fleet_site",
        "planted_site",
        "site_with_capacity",
        "fault_url",
        "replay_url",
        "trickle_url",
        "tool_service",
        "silent_service",
        "upstream",
    }
)

#: Whole modules end to end (every test drives sshd, Chromium or the real model).
E2E_MODULES = frozenset(
    {
        "test_browser",
        "test_fleet_browser",
        "test_hostile_text",
        "test_load_browser",
        "test_model_e2e",
        "test_remote",
        "test_site_check",
    }
)
#: Whole modules in the integration lane: they build sites, run `invoke`, scripts or the
#: sandbox as subprocesses, or serve HTTP on loopback.
INTEGRATION_MODULES = frozenset(
    {
        "test_bad_input",
        "test_charts",
        "test_gpu_scripts",
        "test_seed_rows",
        "test_seed_rows_b",
        "test_committed_data",
        "test_comparable",
        "test_dialects",
        "test_docs_coverage",
        "test_endpoint_models",
        "test_endpoint_pages",
        "test_example_kind",
        "test_faults",
        "test_hardening",
        "test_host_identity",
        "test_host_vs_fleet",
        "test_hostile_corpus",
        "test_isolation",
        "test_layers",
        "test_llama_bench_import",
        "test_llama_server",
        "test_llamacpp_lib",
        "test_load",
        "test_optimization",
        "test_parity",
        "test_property_site",
        "test_quality_roles",
        "test_quality_sandbox",
        "test_quality_styles",
        "test_quality_suites",
        "test_reference",
        "test_roofline",
        "test_sandbox_hardening",
        "test_scripts",
        "test_seed_claims",
        "test_serving",
        "test_site",
        "test_site_consistency",
        "test_site_inputs",
        "test_site_scale_script",
        "test_storage_faults",
        "test_synth",
        "test_transformers_backend",
        "test_verdicts",
        "test_verdicts_site",
        "test_workflows",
    }
)


#: Modules whose tests run alone, never beside another test (marker ``serial``): `invoke test`
#: runs the rest on two workers (pytest-xdist), then these in one process. Their verdicts read
#: rates, latencies or queueing from real loopback servers and the real model (a neighbour test
#: would be load they measure; test_isolation gives each job 3 s, a worker's start-up and all),
#: or they start machine-wide services (munged, slurmctld, slurmd), or they read machine-wide state
#: another test changes (test_hardening: a killed runner's job folder under the temp dir must be
#: left for *its* next run to clean, and any runner another worker starts cleans stale ones first;
#: its workers must also die within 2 s of their runner).
SERIAL_MODULES = frozenset(
    {
        "test_agent_repeats",
        "test_hardening",
        "test_isolation",
        "test_llama_server",
        "test_load",
        "test_load_model",
        "test_serving",
        "test_slurm",
        "test_traffic",
    }
)


def _module_name(item: pytest.Item) -> str:
    """The test's module's own name (``test_load``), or "" for an item outside a module."""
    module = getattr(item, "module", None)
    return module.__name__.rsplit(".", 1)[-1] if module else ""


#: Fixtures that run the real model: llama.cpp's threads spin at each step, so a test beside it
#: on 2 cores slows it many times over (a noise measurement ran past its 10-minute timeout).
MODEL_FIXTURES = frozenset({"embedded_model"})


def is_serial(item: pytest.Item) -> bool:
    """Whether a test must run with no other test beside it: its own marker, a module of
    SERIAL_MODULES, or the real model (the ``model`` marker or a MODEL_FIXTURES fixture)."""
    if item.get_closest_marker("serial") or item.get_closest_marker("model"):
        return True
    if set(getattr(item, "fixturenames", ())) & MODEL_FIXTURES:
        return True
    return _module_name(item) in SERIAL_MODULES


def lane_of(item: pytest.Item) -> str:
    """The lane of one collected test (the module's rule above)."""
    own = [m.name for m in item.iter_markers() if m.name in LANES]
    if own:
        return own[0]
    if item.get_closest_marker("model") or item.get_closest_marker("browser"):
        return "e2e"
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & E2E_FIXTURES:
        return "e2e"
    module = _module_name(item)
    if module in E2E_MODULES:
        return "e2e"
    if module in INTEGRATION_MODULES or fixtures & INTEGRATION_FIXTURES:
        return "integration"
    return "fast"


def mark_lanes(items: list[pytest.Item]) -> None:
    for item in items:
        lane = lane_of(item)
        if not item.get_closest_marker(lane):
            item.add_marker(getattr(pytest.mark, lane))
        if is_serial(item) and not item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.serial)
