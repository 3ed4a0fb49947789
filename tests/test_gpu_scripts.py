"""The GPU path a new user follows (issue 29), kept alive on this CPU machine: gpu_prepare.sh ->
gpu_stage.sh -> (device) gpu_run.sh, and gpu_host_probe.sh, as far as they run without a GPU:
argument handling, staging and what it would carry, the Python they import, the host's name.

The scripts run for real (bash) on a small copy of a checkout whose ``.gpu`` and ``.whl`` are
placeholders (the real ones are git-ignored and 30 MB: not in CI); the code staged is this
checkout's own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "benchmarks"
CARRY_MIB = 64
LLAMA_CPP_TRIMMED_MIB = (
    27  # gpu_prepare.sh's trimmed llama.cpp source (it prints its size)
)
BASH = shutil.which("bash") or "/bin/bash"


def _bash(
    script: Path, *args: str, cwd: Path, env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BASH, str(script), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def checkout(tmp_path):
    """A checkout with this one's code and data, and placeholder .gpu/.whl (as gpu_prepare.sh lays them out)."""
    root = tmp_path / "checkout"
    root.mkdir()
    for d in ("core", "runtime", "pipelines", "almanac_tasks", "benchmarks"):
        shutil.copytree(
            ROOT / d, root / d, ignore=shutil.ignore_patterns("__pycache__", "results")
        )
    for f in ("tasks.py", "pyproject.toml"):
        shutil.copy(ROOT / f, root / f)
    (root / "data").mkdir()
    for d in ("schema", "matrices", "texts"):
        shutil.copytree(ROOT / "data" / d, root / "data" / d)
    shutil.copy(ROOT / "data" / "models.yaml", root / "data" / "models.yaml")
    (root / "data" / "runs" / "some-host").mkdir(parents=True)
    (root / "data" / "runs" / "some-host" / "r.json").write_text("{}")
    (root / ".gpu" / "llama.cpp").mkdir(parents=True)
    (root / ".gpu" / "llama.cpp" / "CMakeLists.txt").write_text("# placeholder\n")
    (root / ".gpu" / "site" / "llama_cpp").mkdir(parents=True)
    (root / ".gpu" / "site" / "llama_cpp" / "llama_cpp.py").write_text(
        "# placeholder\n"
    )
    (root / ".whl").mkdir()
    for w in (
        "pydantic-2.13.4-py3-none-any.whl",
        "pydantic_core-2.46.4-cp312-cp312-manylinux_2_17_x86_64.whl",
        "annotated_types-0.7.0-py3-none-any.whl",
        "typing_inspection-0.4.2-py3-none-any.whl",
        "typing_extensions-4.16.0-py3-none-any.whl",
        "jsonschema-4.26.0-py3-none-any.whl",
        "jsonschema_specifications-2025.9.1-py3-none-any.whl",
        "referencing-0.37.0-py3-none-any.whl",
        "rpds_py-0.30.0-cp312-cp312-manylinux_2_17_x86_64.whl",
        "attrs-26.1.0-py3-none-any.whl",
        "gguf-0.19.0-py3-none-any.whl",
        "diskcache-5.6.3-py3-none-any.whl",
        "fastapi-0.165.0-py3-none-any.whl",
    ):
        (root / ".whl" / w).write_bytes(b"wheel")
    return root


def _size_mib(d: Path) -> float:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 2**20


# -- gpu_stage.sh ------------------------------------------------------------------------------
def test_stage_into_a_folder_of_gpu_itself(checkout):
    """The documented layout that failed (`cp` refused to copy .gpu into itself): DEST inside .gpu."""
    dest = checkout / ".gpu" / "almanac"
    proc = _bash(checkout / "benchmarks" / "gpu_stage.sh", str(dest), cwd=checkout)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert re.search(r"staged .*: \d+ MiB \(12 wheels; limit 64 MiB\)", proc.stdout), (
        proc.stdout
    )
    for need in (
        "benchmarks/gpu_run.sh",
        "benchmarks/gpu_bench.py",
        "runtime/hosts/devices.py",
        "data/models.yaml",
        "data/matrices/gpu-split-layer.yaml",
        "data/matrices/gpu-engines.yaml",
        "data/texts/texts.yaml",  # the load kinds' prompts (the first engines call lacked them)
        ".gpu/llama.cpp/CMakeLists.txt",
        ".gpu/site/llama_cpp/llama_cpp.py",
        ".whl/gguf-0.19.0-py3-none-any.whl",
    ):
        assert (dest / need).exists(), need
    assert not (dest / "data" / "runs").exists()  # never the user's runs
    assert not (
        dest / ".whl" / "fastapi-0.165.0-py3-none-any.whl"
    ).exists()  # the default list only
    assert not (dest / ".gpu" / "almanac").exists()  # not itself


def test_stage_refuses_bad_input(checkout):
    stage = checkout / "benchmarks" / "gpu_stage.sh"
    proc = _bash(stage, cwd=checkout)
    assert proc.returncode != 0 and "usage: gpu_stage.sh DEST" in proc.stderr
    proc = _bash(stage, str(checkout / "x"), "nosuchwheel", cwd=checkout)
    assert proc.returncode == 2 and "no wheel for nosuchwheel in .whl/" in proc.stdout
    assert not (checkout / "x" / "core").exists()  # nothing half-staged
    proc = _bash(
        stage, str(checkout / "x"), cwd=checkout, env={"ALMANAC_CARRY_MIB": "1"}
    )
    assert (
        proc.returncode == 2 and "over the 1 MiB a device call carries" in proc.stdout
    )
    shutil.rmtree(checkout / ".gpu")
    proc = _bash(stage, str(checkout / "x"), cwd=checkout)
    assert proc.returncode == 2 and "run benchmarks/gpu_prepare.sh first" in proc.stdout


def test_what_a_stage_carries_fits_the_limit(checkout):
    """This checkout's code and data as staged, with gpu_prepare.sh's trimmed llama.cpp beside
    them, stay within the 64 MiB a device call carries."""
    dest = checkout.parent / "stage"
    assert (
        _bash(
            checkout / "benchmarks" / "gpu_stage.sh", str(dest), cwd=checkout
        ).returncode
        == 0
    )
    code = _size_mib(dest)
    assert code + LLAMA_CPP_TRIMMED_MIB + 5 < CARRY_MIB, (
        f"{code:.1f} MiB of code and data"
    )


# -- gpu_run.sh and gpu_host_probe.sh -----------------------------------------------------------
def test_run_refuses_what_it_cannot_run(checkout, tmp_path):
    run = checkout / "benchmarks" / "gpu_run.sh"
    out = tmp_path / "out"
    shutil.rmtree(checkout / ".gpu" / "site")
    proc = _bash(run, cwd=checkout, env={"OUT": str(out)})
    assert (
        proc.returncode == 2
        and "missing .gpu/site/llama_cpp/llama_cpp.py" in proc.stdout
    )
    (checkout / ".gpu" / "site" / "llama_cpp").mkdir(parents=True)
    (checkout / ".gpu" / "site" / "llama_cpp" / "llama_cpp.py").write_text("")
    proc = _bash(
        run, cwd=checkout, env={"OUT": str(out), "MATRICES": "data/matrices/nope.yaml"}
    )
    assert (
        proc.returncode == 2
        and "MATRICES names data/matrices/nope.yaml, which does not exist"
        in proc.stdout
    )
    bare = tmp_path / "bin"  # a PATH without nvcc (this machine has none either way)
    bare.mkdir()
    for tool in ("date", "mkdir", "tee", "ls", "cat", "dirname", "nproc"):
        if shutil.which(tool):
            (bare / tool).symlink_to(shutil.which(tool))
    proc = _bash(run, cwd=checkout, env={"OUT": str(out), "PATH": str(bare)})
    assert proc.returncode == 2 and "no nvcc on this machine" in proc.stdout
    assert (out / "gpu_run.log").exists()


def test_run_documents_every_variable_it_reads():
    text = (BENCH / "gpu_run.sh").read_text()
    header = "\n".join(ln for ln in text.splitlines() if ln.startswith("#"))
    read = set(re.findall(r"\$\{([A-Z_]+):[-?]", text))
    assert {
        "STOP_AFTER_BUILD",
        "BUDGET_S",
        "MATRICES",
        "GPU_BENCH_ARGS",
        "ALMANAC_HOST_NAME",
    } <= read
    assert not [v for v in sorted(read) if v not in header]


def test_engines_script_documents_its_variables_and_refuses_without_torch(
    checkout, tmp_path
):
    """benchmarks/gpu_engines.sh (transformers serve beside llama-server): every variable it reads is
    in its header, and on a machine without torch (this one) it says so in one line, exit 2."""
    text = (BENCH / "gpu_engines.sh").read_text()
    header = "\n".join(ln for ln in text.splitlines() if ln.startswith("#"))
    read = set(re.findall(r"\$\{([A-Z_]+):[-?+]", text)) - {"PYTHONPATH"}
    assert {"SHAPE", "PARALLEL", "NO_CB"} <= read
    assert not [v for v in sorted(read) if v not in header]
    proc = _bash(
        checkout / "benchmarks" / "gpu_engines.sh",
        cwd=checkout,
        env={"OUT": str(tmp_path / "out")},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs torch with CUDA and transformers" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_no_script_names_a_fixed_host():
    for name in (
        "gpu_run.sh",
        "gpu_host_probe.sh",
        "gpu_stage.sh",
        "gpu_prepare.sh",
        "gpu_bench.py",
        "gpu_engines.sh",
        "gpu_engines.py",
    ):
        assert "lent-h100" not in (BENCH / name).read_text(), name
    assert not (BENCH / "gpu_h100.sh").exists()  # renamed: it is not only for H100s


def test_default_matrices_name_only_models_the_gpu_host_makes():
    """The GPU host generates synthetic models and has nothing else (no network, a 64 MiB carry):
    the default matrices must not name another model (the traceback of issue 29)."""
    import yaml

    from runtime.execution import matrix

    text = (BENCH / "gpu_run.sh").read_text()
    default = re.search(r"MATRICES=\$\{MATRICES:-([^}]*)\}", text).group(1).split()
    project = (yaml.safe_load((ROOT / "data" / "models.yaml").read_text()) or {}).get(
        "models", {}
    )
    assert default
    for mf in default:
        for name in matrix.load(str(ROOT / mf)).spec.models:
            assert name.startswith("synthetic-") or (project.get(name) or {}).get(
                "synth"
            ), (mf, name)


def test_probe_imports_resolve_and_it_needs_its_wheels(checkout, tmp_path):
    text = (BENCH / "gpu_host_probe.sh").read_text()
    code = text.split("<<'PY'", 1)[1].split("\nPY", 1)[0]
    imports = "\n".join(
        ln for ln in code.splitlines() if re.match(r"(from \S+ )?import ", ln)
    )
    assert "runtime.hosts" in imports
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, 'benchmarks')\n{imports}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(checkout / ".whl")
    proc = _bash(
        checkout / "benchmarks" / "gpu_host_probe.sh",
        cwd=checkout,
        env={"OUT": str(tmp_path / "o")},
    )
    assert proc.returncode == 2 and "missing .whl/*.whl" in proc.stdout


def test_host_named_from_its_fingerprint():
    from runtime.hosts.fingerprint import suggested_name

    run = next((ROOT / "data" / "runs" / "gpu-2x-h200-b0085864").rglob("*.json"))
    fp = json.loads(run.read_text())["host"]  # a run on 1 of the machine's 2 GPUs
    assert suggested_name(fp) == "gpu-2x-h200" == fp["name"]
    assert suggested_name({"cpu": {"logical_cores": 2}, "gpus": []}) == "cpu-2-cores"
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.hosts.fingerprint", "--suggest-name"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and re.fullmatch(
        r"(gpu-\d+x-[a-z0-9-]+|cpu-\d+-cores)\n", proc.stdout
    )
