"""A run's process CPU time (issue 28: an optional run field in at most 4 files): the runner records
the CPU time (user + system) of the run's child over the interval it times (wait4's rusage) as
``resources.process_cpu_s``; the run model declares it and the run viewer shows every resource."""

from __future__ import annotations

import pytest

from core import artifacts
from core.records.run import RunRecord
from tests.support.burn_cpu import BURN_S
from tests.test_example_kind import echo_kind  # noqa: F401  (the example kind and backend)


@pytest.mark.integration
def test_the_child_s_cpu_time_is_what_it_spent():
    from runtime.execution import runner

    outcome = runner.run_child({}, 60.0, module="tests.support.burn_cpu")
    assert outcome.exit_code == 0, outcome.log
    # it burned BURN_S of its own CPU time, plus an interpreter's start-up: whatever else the
    # machine runs meanwhile only stretches the wall time
    assert outcome.cpu_s is not None
    assert BURN_S <= outcome.cpu_s < BURN_S + 3.0, outcome.cpu_s


@pytest.mark.integration
def test_a_run_artifact_records_its_process_cpu_time(echo_kind, data_env):  # noqa: F811
    from runtime.execution import runner
    from tests.conftest import write_matrix

    write_matrix(
        data_env,
        "echo",
        "name: echo\nbackend: echoer\nmodels: [gemma3-270m-q4_k_m]\nprecision: null\n"
        "settings: {delay_ms: 1}\n"
        "tests:\n  - {kind: echo, id: echo-ping, word: pong, requests: 2}\n",
    )
    report = runner.run_matrix("echo")
    assert len(report.measured) == 1, report
    rec = RunRecord(artifacts.load(report.measured[0]))  # valid against the run schema
    cpu = rec.resources.process_cpu_s
    assert isinstance(cpu, float) and 0 < cpu, cpu
    assert rec.envelope.resources.process_cpu_s == cpu
