#!/usr/bin/env bash
# Probe a GPU host's device-memory bandwidth, copy (read + written) and read-only, and write
# its `host` artifact, without building llama.cpp: the figure the decode roofline divides by.
#
#   (on the GPU machine, from the repository root, with .whl carried: benchmarks/gpu_prepare.sh fills it)
#   OUT=/some/folder bash benchmarks/gpu_host_probe.sh
#
# Writes $OUT/data/hosts/<host id>/gpu-bandwidth-<stamp>.json (also flat in $OUT; copy it into
# data/hosts/<host id>/) and $OUT/bandwidth.json (the raw samples). Needs PyTorch or CuPy on the
# machine. ALMANAC_HOST_NAME names the host in the artifact (default: derived from its GPUs,
# `python3 -m runtime.hosts.fingerprint --suggest-name`, as gpu_run.sh does).
set -euo pipefail
OUT=${OUT:-/tmp/gpu-out}; export OUT; mkdir -p "$OUT"
ls .whl/*.whl >/dev/null 2>&1 || { echo "missing .whl/*.whl: run benchmarks/gpu_prepare.sh first and carry .whl"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
ALMANAC_HOST_NAME=${ALMANAC_HOST_NAME:-$(python3 -m runtime.hosts.fingerprint --suggest-name)}
export ALMANAC_HOST_NAME
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi"
python3 -c "import torch; print('torch', torch.__version__)" 2>&1 | tail -1
python3 - <<'PY'
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, "benchmarks")
os.environ["ALMANAC_DATA"] = "/tmp/probe-data"
from runtime.hosts import fingerprint as hostinfo
import gpu_bandwidth, gpu_bench
fp = hostinfo.fingerprint()
print("host", fp["id"], [g["name"] for g in fp["gpus"]])
bw = gpu_bandwidth.measure(4.0, 30, "both")
bw["host_id"] = fp["id"]
bw["created"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
out = Path(os.environ["OUT"])
p = gpu_bench.write_host_artifact(fp, bw, bw["created"], out / "data")
(out / "bandwidth.json").write_text(json.dumps(bw, indent=1))
print("copy median GB/s", bw["median_bytes_per_s"] / 1e9, "read median GB/s", bw["read"]["median_bytes_per_s"] / 1e9)
import shutil
shutil.copy(p, out / p.name)  # flat too: the lender returns no deep folders
print("wrote", p)
PY
