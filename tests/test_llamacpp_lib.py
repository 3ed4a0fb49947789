"""runtime/backends/llama_cpp/lib_policy.py: the extra-buffer-type policy, and a real multi-token decode under it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from runtime.backends.llama_cpp import lib_policy as llamacpp_lib

AMX = "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "
NO_AMX = "CPU : SSE3 = 1 | AVX512 = 1 | REPACK = 1 | "


def test_auto_turns_extra_buffer_types_off_only_with_amx():
    assert llamacpp_lib.decide(AMX, "auto")["use_extra_bufts"] is False
    assert llamacpp_lib.decide(NO_AMX, "auto")["use_extra_bufts"] is True
    assert llamacpp_lib.decide("AMX_INT8 = 0 |", "auto")["use_extra_bufts"] is True


def test_explicit_policy_wins_and_bad_value_is_one_line(monkeypatch):
    assert llamacpp_lib.decide(AMX, "on")["use_extra_bufts"] is True
    assert llamacpp_lib.decide(NO_AMX, "off")["use_extra_bufts"] is False
    monkeypatch.setenv(llamacpp_lib.ENV, "maybe")
    with pytest.raises(ConfigError, match="ALMANAC_EXTRA_BUFTS"):
        llamacpp_lib.decide(NO_AMX)


@pytest.mark.model
def test_multi_token_decode_runs_under_the_policy(embedded_model):
    import subprocess
    import sys

    code = (
        "import sys, llama_cpp\n"
        "from runtime.backends.llama_cpp import lib_policy as llamacpp_lib\n"
        "d = llamacpp_lib.apply()\n"
        "l = llama_cpp.Llama(sys.argv[1], verbose=False, n_ctx=256)\n"
        "l.eval(l.tokenize(b'The quick brown fox jumps over the lazy dog'))\n"
        "print(l.n_tokens, d['use_extra_bufts'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(embedded_model.path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    n_tokens, _ = proc.stdout.split()
    assert int(n_tokens) >= 9
