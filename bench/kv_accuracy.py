"""KV cache dtype and accuracy: the same checkpoint, the same text, float32 vs BF16 vs FP8 KV.

Teacher-forced: held-out text (the shipped ``stdlib-heldout.json``, never seen in training) goes
through the model in one prefill per sequence with the paged backend, whose pool rounds every
cached entry to the KV dtype before attention reads it back. Reports the next-token loss (nats
per token), top-1 agreement with the float32-KV run and the mean KL divergence from it.

    PYTHONPATH=. python -m bench.kv_accuracy --checkpoint ember/models/checkpoints/kimi-tiny
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import kv_layout_for
from ember.models.loader import load_model

KV_DTYPES = ("float32", "bf16", "fp8_e4m3")


def _sequences(checkpoint: Path, heldout: Path, count: int, length: int) -> list[list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    out = []
    for document in json.loads(heldout.read_text())["files"]:
        ids = tokenizer.encode(document["text"]).ids
        if len(ids) >= length:
            out.append(ids[:length])
        if len(out) == count:
            break
    return out


def _logits(model, config, ids: list[int], kv: str, page_size: int = 16) -> torch.Tensor:
    pages = -(-len(ids) // page_size)
    pool = KVPool(kv_layout_for(config, kv), pages, page_size, integrity=False)
    batch = PagedBatch.build(
        BatchLayout((len(ids),), (0,)), [list(range(pages))], page_size, pool.padding_page
    )
    with torch.inference_mode():
        return model(torch.tensor(ids), PagedAttentionBackend(pool, batch)).float()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="ember/models/checkpoints/kimi-tiny")
    parser.add_argument("--heldout", default="ember/models/checkpoints/stdlib-heldout.json")
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "float32"))
    parser.add_argument("--out", default="bench/results/kv_accuracy.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = Path(args.checkpoint)
    weights = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    loaded = load_model(checkpoint, dtype=weights)
    sequences = _sequences(checkpoint, Path(args.heldout), args.sequences, args.length)
    logits = {
        kv: [_logits(loaded.model, loaded.config, ids, kv) for ids in sequences] for kv in KV_DTYPES
    }
    rows = []
    for kv in KV_DTYPES:
        nll = agree = kl = 0.0
        count = 0
        for ids, mine, base in zip(sequences, logits[kv], logits["float32"], strict=True):
            targets = torch.tensor(ids[1:])
            log_p = mine[:-1].log_softmax(-1)
            nll += float(-log_p.gather(1, targets[:, None]).sum())
            log_q = base.log_softmax(-1)
            agree += float((mine.argmax(-1) == base.argmax(-1)).float().sum())
            kl += float((log_q.exp() * (log_q - mine.log_softmax(-1))).sum())
            count += len(ids)
        rows.append(
            {
                "kv_cache_dtype": kv,
                "nll_per_token": nll / (count - len(sequences)),
                "top1_agreement_with_float32_kv": agree / count,
                "kl_from_float32_kv": kl / count,
            }
        )
        print(json.dumps(rows[-1]))
    report = {
        "benchmark": "kv_accuracy",
        "checkpoint": checkpoint.name,
        "weights": args.dtype,
        "sequences": len(sequences),
        "tokens_per_sequence": args.length,
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
