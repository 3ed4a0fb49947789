#!/usr/bin/env bash
# Stage a runnable copy of this checkout for a device call that sends another checkout.
#
#   bash benchmarks/gpu_stage.sh DEST [WHEEL...]
#
# The lender's device call sends the session's own checkout, not a helper's worktree: copy
# what benchmarks/gpu_h100.sh needs into DEST, a folder of that checkout which git ignores and
# the call names in `carry` (64 MiB in all), and run it from there:
#
#   bash benchmarks/gpu_prepare.sh            # once: fills .gpu/ (llama.cpp source, llama_cpp) and .whl/
#   bash benchmarks/gpu_stage.sh /work/main/.gpu/almanac
#   (device, carry [".gpu"]) cd .gpu/almanac && OUT=$OUT MATRICES="..." bash benchmarks/gpu_h100.sh
#
# DEST gets the project's code (core, runtime, pipelines, benchmarks, tasks.py, pyproject.toml),
# the data it reads (data/schema, data/matrices, data/models.yaml), this checkout's .gpu/ and
# the wheels of .whl/ the device image lacks (pydantic and jsonschema with their parts, gguf,
# diskcache for llama_cpp; WHEEL arguments replace that list, "all" takes every wheel).
set -euo pipefail
DEST=${1:?usage: gpu_stage.sh DEST [WHEEL...]}
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ -e .gpu/llama.cpp/CMakeLists.txt ] || { echo "missing .gpu/llama.cpp: run benchmarks/gpu_prepare.sh first"; exit 2; }
WHEELS=("$@")
[ ${#WHEELS[@]} -gt 0 ] || WHEELS=(pydantic pydantic_core annotated_types typing_inspection typing_extensions jsonschema
  jsonschema_specifications referencing rpds_py gguf diskcache)
rm -rf "$DEST"
mkdir -p "$DEST/data" "$DEST/.whl"
cp -a core runtime pipelines benchmarks tasks.py pyproject.toml "$DEST/"
cp -a data/schema data/matrices data/models.yaml "$DEST/data/"
cp -a .gpu "$DEST/.gpu"
for w in "${WHEELS[@]}"; do
  if [ "$w" = all ]; then cp .whl/*.whl "$DEST/.whl/"; continue; fi
  found=$(ls .whl/ | grep -i "^${w}-[0-9]" || true)
  [ -n "$found" ] || { echo "no wheel for $w in .whl/"; exit 2; }
  for f in $found; do cp ".whl/$f" "$DEST/.whl/"; done
done
find "$DEST" -name __pycache__ -type d -prune -exec rm -rf {} +
du -sh "$DEST"
