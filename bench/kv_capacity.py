"""KV capacity at equal bytes: BF16 vs FP8 pools, as SGLang computes ``max_total_num_tokens``.

Pure arithmetic over the shipped configs (full-size Kimi K2/K2.5, GLM-4.7, GLM-5.2) and the tiny
checkpoints of cpu-anchors.md, plus one real allocation per tiny model to confirm that the pool's
tensors take the bytes the arithmetic says. Scale bytes (FP8: one float32 per layer and component)
are reported separately; they are a fixed cost, not per token.

    PYTHONPATH=. python -m bench.kv_capacity  # -> bench/results/kv_capacity.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ember.models.catalog import reference_configs
from ember.models.config_parse import load_config, parse_config
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec, kv_capacity, kv_layout_for

TINY_BUDGET = 64 << 20  # 64 MiB
FULL_BUDGET = 686_000 * 89_856  # the seed's 686k BF16 tokens of GLM-5.2 latent (61.6 GB)


def _row(name: str, spec: KVSpec, budget: int, page_size: int, allocate: bool) -> dict:
    bf16 = kv_capacity(spec.with_dtype("bf16"), budget, page_size)
    fp8 = kv_capacity(spec.with_dtype("fp8_e4m3"), budget, page_size)
    row = {
        "model": name,
        "budget_bytes": budget,
        "page_size": page_size,
        "bf16_bytes_per_token": bf16.cell_size,
        "fp8_bytes_per_token": fp8.cell_size,
        "fp8_scale_bytes_total": fp8.scale_bytes,
        "fp8_scale_bytes_per_token": 0,
        "bf16_max_total_num_tokens": bf16.max_total_num_tokens,
        "fp8_max_total_num_tokens": fp8.max_total_num_tokens,
        "fp8_over_bf16": fp8.max_total_num_tokens / bf16.max_total_num_tokens,
        "integrity_sidecar_bytes_per_token": 20,  # chain 8 + digest 8 + position 4, host memory
    }
    if allocate:
        for dtype, cap in (("bf16", bf16), ("fp8_e4m3", fp8)):
            pool = KVPool(spec.with_dtype(dtype), cap.num_pages, page_size, integrity=False)
            # Allocated = the budgeted pages plus the one zero padding page.
            row[f"{dtype}_allocated_bytes"] = pool.nbytes
            row[f"{dtype}_expected_bytes"] = cap.max_total_num_tokens * cap.cell_size + (
                cap.padding_page_bytes
            )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--out", default="bench/results/kv_capacity.json")
    args = parser.parse_args()
    from bench.tiny_archs import ARCHS  # the tiny configs of cpu-anchors.md

    rows = []
    for name, raw in ARCHS.items():
        config = parse_config(raw, source=f"bench:{name}")
        spec = kv_layout_for(config)
        rows.append(_row(f"{name}-tiny", spec, TINY_BUDGET, args.page_size, allocate=True))
    for name, path in sorted(reference_configs().items()):
        spec = kv_layout_for(load_config(path))
        rows.append(_row(name, spec, FULL_BUDGET, args.page_size, allocate=False))
    for row in rows:
        per_token = f"{row['bf16_bytes_per_token']:>7} / {row['fp8_bytes_per_token']:>7} B/token"
        tokens = f"{row['bf16_max_total_num_tokens']:>9} / {row['fp8_max_total_num_tokens']:>9}"
        print(f"{row['model']:>14}: {per_token}, {tokens} tokens, x{row['fp8_over_bf16']:.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "kv_capacity", "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
