#!/usr/bin/env bash
# Reproduce the GPU host's measurements in one call on a machine with one or more NVIDIA GPUs
# (any card: H100, H200, A100, L4 ...), nvcc, cmake and python3 (no internet needed):
#
#   bash benchmarks/gpu_prepare.sh            # here, once: fills .gpu/ and .whl/
#   (on the GPU machine, from the repository root, with .gpu and .whl carried)
#   OUT=/some/folder bash benchmarks/gpu_run.sh
#
# What comes back in $OUT (8 files at most, for the lender's limit): gpu_run.log,
# cmake-build.log, host.json, bandwidth.json, runs.tar.gz, llama-bench.json,
# llama-bench.log, fidelity.json.
# Steps: install the carried wheels into /tmp/site; build llama.cpp (the commit vendored
# by the pinned llama-cpp-python) with CUDA for one architecture into /tmp: the shared
# libraries that llama-cpp-python's Python part loads (LLAMA_CPP_LIB_PATH) and
# llama-bench from the same tree; then benchmarks/gpu_bench.py: bandwidth, synthetic
# models, our matrix, llama-bench on the same files, fidelity and roofline.
# Several GPUs: llama.cpp spreads a model over every visible GPU (split_mode layer) unless a
# matrix says otherwise (split_mode none / row, tensor_split, main_gpu: data/matrices/gpu-split-*.yaml);
# CUDA_VISIBLE_DEVICES=0 runs on one GPU of the machine, recorded as its own environment
# ("H100 HBM3 · 80 GiB ×1 of 2").
# Environment: OUT (results; default /tmp/gpu-out), CUDA_ARCH (default 90 = Hopper; 80 = A100,
# 89 = L4/L40S), JOBS (default: all cores), ALMANAC_HOST_NAME (the host's name in artifacts;
# default: derived from its GPUs, `python3 -m runtime.hosts.fingerprint --suggest-name`, e.g.
# gpu-2x-h100-hbm3), MATRICES (default: gpu-synthetic, gpu-synthetic-kquant: synthetic models
# only, which this script generates; a matrix naming any other model runs without it),
# WITH_SERVER=1 (also build llama-server; then SERVING_MATRICES, if set, run through it after the
# rate matrices), BUDGET_S (seconds this script may take; optional stages are skipped past it),
# STOP_AFTER_BUILD=1 (build, then stop: a later call on the same warm machine reuses the build),
# BUILD_TARGETS (default "llama llama-bench"; benchmarks/gpu_engines.sh builds llama-server alone),
# GPU_BENCH_ARGS (more arguments for gpu_bench.py, e.g. --no-bandwidth).
set -euo pipefail
START=$(date +%s)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/gpu-out}
CUDA_ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-560}
SRC=/tmp/almanac-llama-src
BUILD=/tmp/almanac-llama-build
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1  # a crash in a worker leaves its Python stack in the log
# Leave NVLink multicast off (shared hosts: see the lender's notes)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# no network there: the transformers backend reads local GGUF files only (no hub lookups to time out)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_run.log") 2>&1
stamp() { echo "[$(date +%T) +$(( $(date +%s) - START ))s] $*"; }

for need in .gpu/llama.cpp/CMakeLists.txt .gpu/site/llama_cpp/llama_cpp.py; do
  [ -e "$need" ] || { echo "missing $need: run benchmarks/gpu_prepare.sh first and carry .gpu and .whl"; exit 2; }
done
ls .whl/*.whl >/dev/null 2>&1 || { echo "missing .whl/*.whl: run benchmarks/gpu_prepare.sh first and carry .whl"; exit 2; }
for mf in ${MATRICES:-}; do [ -f "$mf" ] || { echo "MATRICES names $mf, which does not exist"; exit 2; }; done
command -v nvcc >/dev/null || { echo "no nvcc on this machine: gpu_run.sh builds llama.cpp with CUDA here"; exit 2; }
stamp "host: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
stamp "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none); python: $(python3 --version)"

# 1. Python packages the image lacks, from the carried wheels (no index, no network)
# (WHEELS_INSTALLED=1: a caller installed them already and may be importing them now)
[ -n "${WHEELS_INSTALLED:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="$ROOT:$ROOT/.gpu/site:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"

# 2. llama.cpp with CUDA: libllama + llama-bench from one tree (skipped when already built
#    from the same source on this machine)
sum=$(cd .gpu/llama.cpp && find . -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16)
if [ "$(cat "$BUILD/.source" 2>/dev/null)" != "$sum-$CUDA_ARCH" ]; then
  rm -rf "$SRC" "$BUILD"
  cp -a .gpu/llama.cpp "$SRC"
  commit=$(cat "$SRC/VENDORED_COMMIT" 2>/dev/null || echo unknown)
  # no git in the copied tree: record the vendored commit as the build commit
  sed -i "s/set(BUILD_COMMIT \"unknown\")/set(BUILD_COMMIT \"$commit\")/" "$SRC/cmake/build-info.cmake"
  stamp "configuring llama.cpp $commit (CUDA arch $CUDA_ARCH)"
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF >"$OUT/cmake-build.log" 2>&1 \
    || { tail -40 "$OUT/cmake-build.log"; exit 3; }
  stamp "building ${BUILD_TARGETS:-llama llama-bench} with -j$JOBS"
  # shellcheck disable=SC2086 # BUILD_TARGETS is a list of targets
  cmake --build "$BUILD" --target ${BUILD_TARGETS:-llama llama-bench} -j "$JOBS" >>"$OUT/cmake-build.log" 2>&1 \
    || { tail -60 "$OUT/cmake-build.log"; exit 3; }
  echo "$sum-$CUDA_ARCH" > "$BUILD/.source"
  stamp "built"
  if [ -n "${WITH_SERVER:-}" ]; then  # optional: llama-server from the same tree (no web UI)
    stamp "building llama-server"
    cmake --build "$BUILD" --target llama-server -j "$JOBS" >>"$OUT/cmake-build.log" 2>&1 \
      && stamp "built llama-server: $("$BUILD/bin/llama-server" --version 2>&1 | grep -m1 version)" \
      || stamp "llama-server did not build (see cmake-build.log); going on without it"
  fi
fi
export LLAMA_CPP_LIB_PATH="$BUILD/bin"
# the managed llama-server kind (runtime/backends/openai_http) runs this build's binary
[ -x "$BUILD/bin/llama-server" ] && export ALMANAC_LLAMA_SERVER="$BUILD/bin/llama-server"
[ -n "${STOP_AFTER_BUILD:-}" ] && exit 0
python3 -c "import llama_cpp, importlib.metadata as m; print('llama-cpp-python', m.version('llama-cpp-python'), 'gpu offload:', llama_cpp.llama_supports_gpu_offload())"
# the transformers backend's stack, where a matrix uses it (a missing piece shows here, not per configuration)
case "${MATRICES:-}" in *transformers*)
  python3 -c "import torch, transformers, accelerate, gguf, pynvml as nv; nv.nvmlInit(); h = nv.nvmlDeviceGetHandleByIndex(0); print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| transformers', transformers.__version__, '| gguf', __import__('importlib.metadata').metadata.version('gguf'), '| NVML energy mJ', nv.nvmlDeviceGetTotalEnergyConsumption(h))" ;;
esac

# 3. measurements
ALMANAC_HOST_NAME=${ALMANAC_HOST_NAME:-$(python3 -m runtime.hosts.fingerprint --suggest-name)}
export ALMANAC_HOST_NAME
stamp "host name: $ALMANAC_HOST_NAME; GPUs: $(nvidia-smi -L 2>/dev/null | wc -l) on the machine, visible: ${CUDA_VISIBLE_DEVICES:-all}"
# MATRICES: the matrix files in order (later ones are skipped past the deadline)
MATRICES=${MATRICES:-data/matrices/gpu-synthetic.yaml data/matrices/gpu-synthetic-kquant.yaml}
margs=(); for mf in $MATRICES; do margs+=(--matrix "$mf"); done
python3 benchmarks/gpu_bench.py --out "$OUT" --work /tmp/almanac-gpu "${margs[@]}" ${GPU_BENCH_ARGS:-} \
  --llama-bench "$BUILD/bin/llama-bench" --deadline $(( START + BUDGET_S - 90 ))
stamp "done"
