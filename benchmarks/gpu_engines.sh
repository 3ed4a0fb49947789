#!/usr/bin/env bash
# Two engine families on one GPU (issue 31): transformers serve and llama-server, the same random
# weights, the same matrix (data/matrices/gpu-engines.yaml), in one device call:
#
#   bash benchmarks/gpu_prepare.sh                       # here, once: .gpu/ and .whl/
#   bash benchmarks/gpu_stage.sh /work/main/.dev-gpu all # stage this checkout with every wheel
#   (device, carry [".dev-gpu"]) cd .dev-gpu && OUT=$OUT bash benchmarks/gpu_engines.sh
#
# The machine needs torch and transformers >= 5 (transformers serve) with a CUDA GPU, nvcc and
# cmake; the carried wheels add what transformers serve lacks there (fastapi, uvicorn, openai,
# pydantic). Steps: llama-server is built with CUDA in the background (benchmarks/gpu_run.sh,
# BUILD_TARGETS=llama-server, STOP_AFTER_BUILD=1) while benchmarks/gpu_engines.py writes the
# synthetic model in both formats and starts transformers serve; the matrix runs against
# transformers serve once the build has finished (nothing else busy), then against llama-server.
# Results in $OUT: gpu_run.log, cmake-build.log, engines.log, host.json, runs.tar.gz,
# transformers-serve.log, llama-server.log. Environment: OUT, SHAPE (default llama-1b),
# PARALLEL (llama-server slots, default 16), NO_CB=1 (transformers serve without continuous
# batching), ALMANAC_HOST_NAME (default: from the fingerprint), CUDA_ARCH, JOBS.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1
python3 -c "import torch, transformers; assert torch.cuda.is_available(), 'no CUDA GPU'; print('torch', torch.__version__, '| transformers', transformers.__version__)" 2>/dev/null \
  || { echo "gpu_engines.sh needs torch with CUDA and transformers >= 5"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="$ROOT:$ROOT/.gpu/site:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
ALMANAC_HOST_NAME=${ALMANAC_HOST_NAME:-$(python3 -m runtime.hosts.fingerprint --suggest-name)}
export ALMANAC_HOST_NAME
# the build, in the background (its own log: gpu_run.log, cmake-build.log)
WHEELS_INSTALLED=1 OUT="$OUT" WITH_SERVER=1 STOP_AFTER_BUILD=1 BUILD_TARGETS=llama-server bash benchmarks/gpu_run.sh >/dev/null 2>&1 &
build_pid=$!
python3 benchmarks/gpu_engines.py --out "$OUT" --shape "${SHAPE:-llama-1b}" --parallel "${PARALLEL:-16}" \
  --llama-server /tmp/almanac-llama-build/bin/llama-server --build-pid "$build_pid" ${NO_CB:+--no-continuous-batching} \
  2>&1 | tee "$OUT/engines.log"
