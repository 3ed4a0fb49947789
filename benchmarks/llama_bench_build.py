"""Build llama-bench from the llama.cpp source vendored in the pinned llama-cpp-python sdist.

Used by benchmarks/fidelity.py. The build lives outside the repository, in
``<cache>/llama-bench/<commit>/`` (``<cache>`` = ~/.cache/inference-almanac or
$ALMANAC_CACHE), and is reused while its configuration is unchanged.

Build flags follow llama-cpp-python's wheel so both sides run the same kernels. Its
CMakeLists.txt adds vendor/llama.cpp with BUILD_SHARED_LIBS=ON and otherwise llama.cpp's
defaults (pyproject [tool.scikit-build] sets no CMake define; scikit-build-core builds
Release): GGML_NATIVE=ON (-march=native, unless SOURCE_DATE_EPOCH is set), GGML_OPENMP=ON,
GGML_LLAMAFILE=ON, GGML_CPU_REPACK=ON. Those are passed explicitly here, plus $CMAKE_ARGS
(llama-cpp-python's pip build honours that variable: set it as you did for pip). The tests,
examples and unified app are switched off; only the targets in ``TARGETS`` are built
(llama-bench, llama-server, llama-perplexity, llama-quantize), all in ``<build>/bin``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from core import untar
from core.errors import ConfigError
from core.paths import cache_dir, project_root

DIST = "llama-cpp-python"
SDIST_STEM = "llama_cpp_python"

# What llama-cpp-python's wheel build amounts to (see the module docstring), made explicit.
WHEEL_LIKE_DEFINES = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_NATIVE=ON",
    "-DGGML_OPENMP=ON",
    "-DGGML_LLAMAFILE=ON",
    "-DGGML_CPU_REPACK=ON",
]
# Only what llama-bench needs (each checked to exist in the vendored tree: see check_options).
MINIMAL_DEFINES = [
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_OPENSSL=OFF",
]
TARGET = "llama-bench"
# Every tool the project drives, built together from the same vendored source so that they
# share one libllama: llama-bench (fidelity), llama-server (a second real server for the
# backend comparison), llama-perplexity (the perplexity / KL-divergence check) and
# llama-quantize (the quantization ladder's reference command).
TARGETS = ("llama-bench", "llama-server", "llama-perplexity", "llama-quantize")


def pinned_version() -> str:
    """The llama-cpp-python version pinned in pyproject.toml (and check it is the one installed)."""
    from importlib import metadata

    text = (project_root() / "pyproject.toml").read_text()
    m = re.search(r'"llama-cpp-python==([^"]+)"', text)
    if not m:
        raise ConfigError(
            "no exact pin llama-cpp-python==X",
            file="pyproject.toml",
            field="project.dependencies",
        )
    pinned = m.group(1)
    try:
        installed = metadata.version(DIST)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"{DIST} is not installed (pip install -e .)", file="pyproject.toml"
        ) from None
    if installed != pinned:
        raise ConfigError(
            f"installed {DIST} {installed} differs from the pinned {pinned}; reinstall (pip install -e .)",
            file="pyproject.toml",
            field="project.dependencies",
        )
    return pinned


def sdist_candidates(version: str) -> list[Path]:
    name = f"{SDIST_STEM}-{version}.tar.gz"
    return [cache_dir() / "sdist" / name, Path.home() / ".cache" / "almanac-src" / name]


def find_sdist(version: str, explicit: str | None = None, log=print) -> Path:
    """The sdist of ``version``: --sdist, a cached copy, or ``pip download`` into the cache."""
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise ConfigError("no such file", file=str(p), field="--sdist")
        return p
    for p in sdist_candidates(version):
        if p.is_file():
            return p
    dest = cache_dir() / "sdist"
    dest.mkdir(parents=True, exist_ok=True)
    log(f"downloading the {DIST} {version} sdist into {dest} …")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-binary",
        ":all:",
        "--no-deps",
        f"{DIST}=={version}",
        "-d",
        str(dest),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    target = dest / f"{SDIST_STEM}-{version}.tar.gz"
    if proc.returncode != 0 or not target.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(
            f"pip download failed: {tail[0]}", file=f"{DIST}=={version}", field="sdist"
        )
    return target


def vendored_commit(sdist: Path, version: str) -> str:
    """The llama.cpp commit of ``version``, from the CHANGELOG inside the sdist."""
    with tarfile.open(sdist) as tar:
        member = tar.getmember(f"{SDIST_STEM}-{version}/CHANGELOG.md")
        text = tar.extractfile(member).read().decode()
    return commit_from_changelog(text, version, source=str(sdist))


def commit_from_changelog(text: str, version: str, source: str = "CHANGELOG.md") -> str:
    """First ``update llama.cpp to ggml-org/llama.cpp@<sha>`` line in the ``## [version]`` section."""
    m = re.search(
        rf"^## \[{re.escape(version)}\]\s*$(.*?)(?=^## \[|\Z)", text, re.M | re.S
    )
    if not m:
        raise ConfigError(
            f"no section for {version}", file=source, field="CHANGELOG.md"
        )
    c = re.search(r"llama\.cpp@([0-9a-f]{7,40})", m.group(1))
    if not c:
        raise ConfigError(
            f"section {version} names no llama.cpp commit",
            file=source,
            field="CHANGELOG.md",
        )
    return c.group(1)


@dataclass
class BuildInfo:
    commit: str
    binary: str
    lib_dir: str
    cmake_args: list[str]
    build_s: float | None
    reused: bool
    compiler: str
    build_command: str

    def to_dict(self) -> dict:
        return asdict(self)


def build_root(commit: str) -> Path:
    return cache_dir() / "llama-bench" / commit


def check_options(src: Path, defines: list[str]) -> None:
    """Every -D option we set must be declared (option() or `if (NOT DEFINED ...)`) in the vendored
    tree's top-level or ggml CMake files, so a renamed option fails loudly instead of being ignored."""
    text = "\n".join(
        p.read_text(errors="replace")
        for p in [src / "CMakeLists.txt", src / "ggml" / "CMakeLists.txt"]
    )
    for d in defines:
        name = d[2:].split("=", 1)[0]
        if name.startswith("CMAKE_") or name == "BUILD_SHARED_LIBS":
            continue
        if not re.search(rf"option\(\s*{name}\b|DEFINED\s+{name}\b", text):
            raise ConfigError(
                f"CMake option {name} does not exist in this llama.cpp tree",
                file=str(src),
                field=name,
            )


def _extract(sdist: Path, version: str, dest: Path) -> None:
    prefix = f"{SDIST_STEM}-{version}/vendor/llama.cpp/"
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            if m.name.startswith(prefix) and len(m.name) > len(prefix):
                m.name = m.name[len(prefix) :]
                members.append(m)
        untar.extract(tar, tmp, members)
    tmp.replace(dest)


def compiler_version() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or "cc"
    try:
        return subprocess.run(
            [cc, "--version"], capture_output=True, text=True
        ).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def tool_path(info: BuildInfo, name: str) -> Path:
    """The path of one of ``TARGETS`` in a build."""
    if name not in TARGETS:
        raise ConfigError(
            f"unknown llama.cpp tool {name!r}; built: {', '.join(TARGETS)}",
            field="tool",
        )
    return Path(info.lib_dir) / name


def ensure_llama_bench(
    sdist: Path, version: str, commit: str, jobs: int | None = None, log=print
) -> BuildInfo:
    """Build llama-bench for ``commit`` unless a build with the same CMake arguments exists."""
    root = build_root(commit)
    src, build, record = root / "src", root / "build", root / "build.json"
    extra = shlex.split(os.environ.get("CMAKE_ARGS", ""))
    # The sdist carries no git history: tell llama.cpp its commit, so llama-bench's
    # build_commit field names it instead of "unknown".
    defines = (
        WHEEL_LIKE_DEFINES
        + MINIMAL_DEFINES
        + [f"-DLLAMA_BUILD_COMMIT={commit}"]
        + extra
    )
    binary = build / "bin" / TARGET
    if record.is_file() and all((build / "bin" / t).is_file() for t in TARGETS):
        info = BuildInfo(**json.loads(record.read_text()))
        if info.cmake_args == defines:
            info.reused = True
            return info
        log(
            "CMake arguments changed since the cached build: reconfiguring (incremental rebuild)"
        )
        record.unlink()
    if not (src / "CMakeLists.txt").is_file():
        log(f"extracting vendor/llama.cpp from {sdist.name} into {src} …")
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(src, ignore_errors=True)
        _extract(sdist, version, src)
    check_options(
        src, defines[: len(defines) - len(extra)]
    )  # ours; $CMAKE_ARGS is the user's
    jobs = jobs or os.cpu_count() or 1
    configure = ["cmake", "-S", str(src), "-B", str(build), *defines]
    compile_ = ["cmake", "--build", str(build), "--target", *TARGETS, "-j", str(jobs)]
    log(
        f"building {', '.join(TARGETS)} ({commit}) with -j{jobs}; this takes a few minutes the first time …"
    )
    t0 = time.perf_counter()
    for cmd in (configure, compile_):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            (root / "build-error.log").write_text(proc.stdout + proc.stderr)
            raise ConfigError(
                f"`{shlex.join(cmd[:3])} …` failed (log: {root / 'build-error.log'})",
                file=str(src),
                field="cmake",
            )
    info = BuildInfo(
        commit=commit,
        binary=str(binary),
        lib_dir=str(build / "bin"),
        cmake_args=defines,
        build_s=round(time.perf_counter() - t0, 1),
        reused=False,
        compiler=compiler_version(),
        build_command=f"{shlex.join(configure)} && {shlex.join(compile_)}",
    )
    record.write_text(json.dumps(info.to_dict(), indent=2))
    return info


def system_info(lib_dir: str | None = None) -> dict[str, str | None]:
    """llama.cpp's system-info string of the wheel's libraries, or of the libraries in ``lib_dir``
    (llama-cpp-python loads those when $LLAMA_CPP_LIB_PATH is set), in a child process, with the
    path of the ggml CPU library that really got loaded."""
    env = dict(os.environ)
    if lib_dir:
        env["LLAMA_CPP_LIB_PATH"] = lib_dir
    code = (
        "import llama_cpp\n"
        "print(llama_cpp.llama_print_system_info().decode().strip())\n"
        "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libggml-cpu' in l}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        return {
            "system_info": f"unavailable ({proc.stderr.strip()[-200:]})",
            "ggml_cpu_library": None,
        }
    info, libs = proc.stdout.strip().splitlines()[-2:]
    return {"system_info": info, "ggml_cpu_library": libs}


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) llama.cpp's tools and print the folder that holds them."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument(
        "--sdist",
        default=None,
        help="Path to the llama-cpp-python sdist (default: cache, else pip download).",
    )
    ap.add_argument(
        "--jobs", type=int, default=None, help="Build parallelism (default: all CPUs)."
    )
    a = ap.parse_args(argv)
    try:
        version = pinned_version()
        sdist = find_sdist(version, a.sdist, log=lambda m: print(m, file=sys.stderr))
        info = ensure_llama_bench(
            sdist,
            version,
            vendored_commit(sdist, version),
            a.jobs,
            log=lambda m: print(m, file=sys.stderr),
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(info.lib_dir)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
