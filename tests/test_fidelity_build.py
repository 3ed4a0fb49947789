"""benchmarks/llama_bench_build.py: the pieces that need neither the sdist nor a compiler."""

from __future__ import annotations

import sys

import pytest

from core.errors import ConfigError
from runtime.backends.llama_cpp.backend import VENDORED_LLAMA_CPP

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import llama_bench_build as lbb

CHANGELOG = """# Changelog

## [Unreleased]

## [0.3.36]

- feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098

## [0.3.35]

- feat: update llama.cpp to ggml-org/llama.cpp@4df29be4f
- feat: update llama.cpp to ggml-org/llama.cpp@adb55e514
"""


def test_commit_is_read_from_the_versions_own_section():
    assert lbb.commit_from_changelog(CHANGELOG, "0.3.36") == "0c1e57098"
    assert (
        lbb.commit_from_changelog(CHANGELOG, "0.3.35") == "4df29be4f"
    )  # the latest update of that release
    with pytest.raises(ConfigError, match="no section for 0.3.99"):
        lbb.commit_from_changelog(CHANGELOG, "0.3.99")
    with pytest.raises(ConfigError, match="names no llama.cpp commit"):
        lbb.commit_from_changelog("## [0.4.0]\n- fix: something\n", "0.4.0")


def test_pinned_version_has_a_recorded_vendored_commit():
    assert lbb.pinned_version() in VENDORED_LLAMA_CPP


def test_cmake_options_are_checked_against_the_tree(tmp_path):
    (tmp_path / "ggml").mkdir()
    (tmp_path / "CMakeLists.txt").write_text(
        'option(LLAMA_BUILD_TESTS "x" ON)\nif (NOT DEFINED LLAMA_BUILD_COMMIT)\n'
    )
    (tmp_path / "ggml" / "CMakeLists.txt").write_text('option(GGML_NATIVE "x" ON)\n')
    lbb.check_options(
        tmp_path,
        [
            "-DCMAKE_BUILD_TYPE=Release",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DGGML_NATIVE=ON",
            "-DLLAMA_BUILD_COMMIT=abc",
        ],
    )
    with pytest.raises(ConfigError, match="GGML_OPENMP does not exist"):
        lbb.check_options(tmp_path, ["-DGGML_OPENMP=ON"])
