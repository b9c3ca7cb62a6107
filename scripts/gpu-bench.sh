#!/usr/bin/env bash
# GPU benchmarks (run after scripts/gpu-check.sh, same wheels): the embedded engine on CUDA.
#   1. bench.engine_decode --device cuda: decode steps at batch 1 and 64 in BF16 and FP8 KV, and
#      64 requests served at equal KV bytes (FP8 over BF16, the issue's ratio) -> engine_decode_cuda.json
#   2. bench.ai overhead with the model server on CUDA and the runtime on the machine's cores:
#      what env.AI.run adds over the model server at 1/16/64 streams -> ai_cuda.json (+ .png)
#   3. bench.serving over HTTP at 64 concurrent, BF16 and FP8 KV at equal bytes (glm4moe-tiny),
#      with SERVING_THREADS torch threads per server (default 1, as on CPU) -> serving_cuda.json
#
# The device tool carries at most 64 MiB: the three shipped checkpoints' weights are ~63 MB, so
# move kimi-tiny's and glmdsa-tiny's model.safetensors aside for the run (glm4moe-tiny is what
# stages 2 and 3 and gpu-check.sh load; stage 1 builds random-init models).
# Each stage has its own time limit (ENGINE_S, AI_S, SERVING_S seconds) and writes to $OUT (or
# bench/results/); a stage that fails or times out does not stop the next.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
OUT="${OUT:-bench/results}"
DEVICE="${DEVICE:-cuda:0}"
status=0
timeout "${ENGINE_S:-180}" "$PYTHON" -m bench.engine_decode --device "$DEVICE" --threads 4 \
    --arch kimi glm4 glmdsa --kv bf16 fp8_e4m3 ${ENGINE_ARGS:---batch 1 64 --steps 32 --repeats 2 \
    --equal-budget-seqs 32 8} --out "$OUT/engine_decode_cuda.json" || status=$?
timeout "${AI_S:-150}" "$PYTHON" -m bench.ai --sections overhead --server-device "$DEVICE" \
    ${AI_ARGS:---rounds 3} --out "$OUT/ai_cuda.json" || status=$?
timeout "${SERVING_S:-150}" "$PYTHON" -m bench.serving --device "$DEVICE" --arch glm4moe \
    --servers bf16 fp8 --concurrency 64 --repeats 2 --threads "${SERVING_THREADS:-1}" \
    --out "$OUT/serving_cuda.json" || status=$?
exit $status
