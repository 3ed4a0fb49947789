#!/usr/bin/env bash
# Prepare what benchmarks/gpu_run.sh needs on a GPU machine that has no internet:
#
#   .gpu/llama.cpp/   llama.cpp as vendored in the llama-cpp-python sdist pinned by
#                     pyproject.toml, trimmed to what a CUDA build of libllama,
#                     llama-bench and llama-server needs (no other backends, docs, models,
#                     web UI assets): ~27 MB
#   .gpu/site/        llama-cpp-python's pure-Python package (llama_cpp/*.py) and its
#                     dist-info, to run against the CUDA libraries built there
#                     (LLAMA_CPP_LIB_PATH)
#   .whl/             cp312 manylinux wheels of our pure dependencies missing there (and what
#                     transformers serve needs beside them: fastapi, uvicorn, openai)
#
# Both folders are ignored by git (.gitignore / .git/info/exclude) and travel with a
# device call through its `carry` list. Run from the repository root:
#
#   bash benchmarks/gpu_prepare.sh [SDIST]   (default: the sdist pip would build from)
set -euo pipefail

VERSION=0.3.36
SDIST=${1:-${ALMANAC_LLAMA_SDIST:-$HOME/.cache/almanac-src/llama_cpp_python-$VERSION.tar.gz}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
cd "$ROOT"

if [ ! -f "$SDIST" ]; then
  mkdir -p "$(dirname "$SDIST")"
  "$PY" -m pip download -q --no-deps --no-binary=:all: -d "$(dirname "$SDIST")" "llama-cpp-python==$VERSION"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$SDIST" -C "$work"
src="$work/llama_cpp_python-$VERSION"
vend="$src/vendor/llama.cpp"

rm -rf .gpu && mkdir -p .gpu/llama.cpp .gpu/site
# llama.cpp: build files, the libraries, the tools CMake configures (llama-bench among them)
for p in CMakeLists.txt LICENSE cmake common include src vendor app tools licenses; do
  cp -a "$vend/$p" .gpu/llama.cpp/
done
# (tools/cli stays: CMake adds it beside the server)
# llama-server: its sources without tests or benchmarks, and the web UI's build files only
# (no npm, no network there: the server builds without an embedded UI)
rm -rf .gpu/llama.cpp/tools/server/tests .gpu/llama.cpp/tools/server/bench .gpu/llama.cpp/tools/server/themes
find .gpu/llama.cpp/tools/ui -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt ! -name '*.in' ! -name sources.cmake -exec rm -rf {} +
mkdir -p .gpu/llama.cpp/scripts
cp -a "$vend/scripts/ui-assets.cmake" .gpu/llama.cpp/scripts/
mkdir -p .gpu/llama.cpp/ggml/src
cp -a "$vend/ggml/CMakeLists.txt" "$vend/ggml/cmake" "$vend/ggml/include" .gpu/llama.cpp/ggml/
find "$vend/ggml/src" -maxdepth 1 -type f -exec cp -a {} .gpu/llama.cpp/ggml/src/ \;
cp -a "$vend/ggml/src/ggml-cpu" "$vend/ggml/src/ggml-cuda" .gpu/llama.cpp/ggml/src/
# the commit the sdist vendors (llama-bench prints it as build_commit when git is absent)
grep -m1 -oE 'llama\.cpp@[0-9a-f]{7,}' "$src/CHANGELOG.md" | cut -d@ -f2 > .gpu/llama.cpp/VENDORED_COMMIT || true

# llama-cpp-python: the pure-Python package and its dist-info (for importlib.metadata)
mkdir -p .gpu/site/llama_cpp
cp "$src"/llama_cpp/*.py "$src/llama_cpp/py.typed" .gpu/site/llama_cpp/
cp -a "$src/llama_cpp/server" .gpu/site/llama_cpp/   # python -m llama_cpp.server, for the serving matrices
dist=.gpu/site/llama_cpp_python-$VERSION.dist-info
mkdir -p "$dist"
sed -n '/^$/q;p' "$src/PKG-INFO" > "$dist/METADATA"
printf 'Wheel-Version: 1.0\nGenerator: benchmarks/gpu_prepare.sh\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n' > "$dist/WHEEL"
: > "$dist/RECORD"

# wheels: our dependencies that the device image lacks (or holds at another version)
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 \
  typing_extensions==4.16.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
  rpds-py==0.30.0 attrs==26.1.0 gguf==0.19.0 diskcache==5.6.3 \
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 sse-starlette==3.7.0 starlette-context==0.3.6 \
  pydantic-settings==2.14.1 python-dotenv==1.2.2 annotated-doc==0.0.7 anyio==4.16.0 h11==0.16.0 click==8.5.1 \
  opentelemetry-api==1.45.2 \
  openai==1.109.1 jiter==0.11.0 distro==1.9.0 sniffio==1.3.1   # transformers serve (gpu_engines.sh)

du -sh .gpu/llama.cpp .gpu/site .whl
