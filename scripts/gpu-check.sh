#!/usr/bin/env bash
# GPU check of the AI path (see scripts/gpu_check.py): the embedded engine on CUDA through the
# model pool with BF16 and FP8 KV and INT4 weights, and an SGLang replica where SGLang exists.
# Writes gpu-check.json to $OUT (or bench/results/). A few minutes on one GPU.
#
# The GPU image has torch and httpx but no starlette/uvicorn/httptools/websockets: carry their
# wheels in .whl/, for that machine's Python (3.12):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#     starlette uvicorn httptools websockets
# and they are installed into /tmp/site first (scripts/gpu-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
exec "$PYTHON" scripts/gpu_check.py "$@"
