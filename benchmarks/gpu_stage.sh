#!/usr/bin/env bash
# Stage a runnable copy of this checkout for a device call that sends another checkout.
#
#   bash benchmarks/gpu_stage.sh DEST [WHEEL...]
#
# The lender's device call sends the session's own checkout (with the git-ignored folders its
# `carry` names, 64 MiB in all), not a helper's worktree: copy what benchmarks/gpu_run.sh needs
# into DEST, a git-ignored folder of that checkout, and run it from there:
#
#   bash benchmarks/gpu_prepare.sh                      # once: fills .gpu/ and .whl/ here
#   bash benchmarks/gpu_stage.sh /work/main/.dev-gpu    # then (device, carry [".dev-gpu"]):
#   cd .dev-gpu && OUT=$OUT bash benchmarks/gpu_run.sh
#
# DEST gets the project's code (core, runtime, pipelines, almanac_tasks, benchmarks, tasks.py,
# pyproject.toml), the data it reads (data/schema, data/matrices, data/texts, data/models.yaml; never data/runs), this
# checkout's .gpu/ (llama.cpp source, llama-cpp-python's Python part) and the wheels of .whl/ the
# device image lacks (pydantic and jsonschema with their parts, gguf, diskcache for llama_cpp;
# WHEEL arguments replace that list, "all" takes every wheel). DEST may lie inside this checkout
# (even inside .gpu/): it is left out of what is copied. It prints what it staged and its size,
# and refuses (exit 2) a stage larger than the carry limit (ALMANAC_CARRY_MIB, default 64).
set -euo pipefail
DEST=${1:?usage: gpu_stage.sh DEST [WHEEL...]}
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LIMIT_MIB=${ALMANAC_CARRY_MIB:-64}
[ -e .gpu/llama.cpp/CMakeLists.txt ] || { echo "missing .gpu/llama.cpp: run benchmarks/gpu_prepare.sh first"; exit 2; }
[ -e .gpu/site/llama_cpp/llama_cpp.py ] || { echo "missing .gpu/site/llama_cpp: run benchmarks/gpu_prepare.sh first"; exit 2; }
WHEELS=("$@")
[ ${#WHEELS[@]} -gt 0 ] || WHEELS=(pydantic pydantic_core annotated_types typing_inspection typing_extensions jsonschema
  jsonschema_specifications referencing rpds_py attrs gguf diskcache)
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
case "$ROOT/" in "$DEST"/*) echo "DEST $DEST contains this checkout: choose a folder inside or beside it"; exit 2 ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-stage.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data" "$tmp/.whl" "$tmp/.gpu"
cp -a core runtime pipelines almanac_tasks benchmarks tasks.py pyproject.toml "$tmp/"
cp -a data/schema data/matrices data/texts data/models.yaml "$tmp/data/"  # texts: the load kinds' prompts
# .gpu's two parts only (DEST itself may lie inside .gpu)
cp -a .gpu/llama.cpp .gpu/site "$tmp/.gpu/"
for w in "${WHEELS[@]}"; do
  if [ "$w" = all ]; then cp .whl/*.whl "$tmp/.whl/"; continue; fi
  found=$(ls .whl/ 2>/dev/null | grep -i "^${w}-[0-9]" || true)
  [ -n "$found" ] || { echo "no wheel for $w in .whl/ (benchmarks/gpu_prepare.sh fills it)"; exit 2; }
  for f in $found; do cp ".whl/$f" "$tmp/.whl/"; done
done
find "$tmp" \( -name __pycache__ -o -name .pytest_cache \) -type d -prune -exec rm -rf {} +
size_kib=$(du -sk "$tmp" | cut -f1)
if [ "$size_kib" -gt $(( LIMIT_MIB * 1024 )) ]; then
  echo "staged $(( size_kib / 1024 )) MiB, over the ${LIMIT_MIB} MiB a device call carries"; exit 2
fi
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$tmp" "$DEST"
trap - EXIT
echo "staged $DEST: $(( size_kib / 1024 )) MiB ($(find "$DEST/.whl" -type f -name '*.whl' | wc -l) wheels; limit ${LIMIT_MIB} MiB)"
