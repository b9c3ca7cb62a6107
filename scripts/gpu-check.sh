#!/usr/bin/env bash
# GPU check of the AI path (see scripts/gpu_check.py): the embedded engine on CUDA through the
# model pool with BF16 and FP8 KV and INT4 weights, and an SGLang replica where SGLang exists.
# Writes gpu-check.json to $OUT (or bench/results/). A few minutes on one GPU.
#
# The GPU image has torch and httpx but no starlette/uvicorn: carry their wheels in .whl/
#   (here: pip download --no-deps --only-binary=:all: -d .whl starlette uvicorn)
# and they are installed into /tmp/site first.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
exec "$PYTHON" scripts/gpu_check.py "$@"
