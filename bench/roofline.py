"""The memory-bandwidth roofline for decode on this machine, and the fraction ember reaches.

Bandwidth is measured as cpu-anchors.md measures it: ``torch`` copies (``dst.copy_(src)``,
2 x size bytes moved) and triads (``a = b + s * c``, 3 x size) over a 1 GiB working set (DRAM)
and a 32 MiB one (cache), best of several repetitions, with the torch thread count the server ran
with.

Bytes read per decode step at batch ``B`` (context ``T`` tokens per sequence): every weight
except the embedding table (``B`` rows of it) and the routed experts (each expert is read when at
least one of the ``B`` tokens routes to it: with top-k of E experts and uniform routing, the
expected share touched is ``1 - (1 - k/E)^B``), plus the KV cache read (``B x T x`` bytes per
token). The roofline is ``B x bandwidth / bytes``: tokens per second if decode did nothing but
stream those bytes.

The measured decode rate comes from a serving run (``bench/results/serving.json``, medians over
its repeats): each running request gets one token per step, so decode tokens/s is about
``B / ITL`` (``B`` the running batch the server reported, ITL the mean inter-token latency); the
end-to-end output tokens/s (prefill included) is shown beside it. On a shared machine the server
gets only part of a core, so the rate per server CPU-second is compared with the roofline too.

    PYTHONPATH=. python -m bench.roofline --threads 1

Results: ``bench/results/roofline.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.serving import ARCHS, REPO, checkpoint
from bench.serving_probe import load_average
from ember.models.kv.spec import kv_layout_for
from ember.models.loader import load_model
from ember.models.quant import QuantConfig, quantize_model

EXPERT = re.compile(r"\.mlp\.experts\.\d+\.")


def bandwidth(size_bytes: int, repeats: int) -> dict[str, float]:
    n = size_bytes // 4
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    best_copy = best_triad = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a.copy_(b)
        best_copy = min(best_copy, time.perf_counter() - start)
        start = time.perf_counter()
        torch.add(b, c, alpha=1.5, out=a)
        best_triad = min(best_triad, time.perf_counter() - start)
    return {
        "copy_gb_s": 2 * n * 4 / best_copy / 1e9,
        "triad_gb_s": 3 * n * 4 / best_triad / 1e9,
    }


def _module_bytes(module: torch.nn.Module, seen: set[int]) -> int:
    """A module's own parameters and buffers (as ``model_weight_bytes`` counts them), each
    tensor once: a tied embedding and head are one read."""
    total = 0
    for tensor in [*module.parameters(recurse=False), *module.buffers(recurse=False)]:
        key = tensor.data_ptr() if tensor.numel() else id(tensor)
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total


def bytes_per_step(
    model: torch.nn.Module, config, batch: float, context: int, kv_dtype: str
) -> int:
    experts, topk = config.moe.n_routed_experts, config.moe.num_experts_per_tok
    touched = 1.0 - (1.0 - topk / experts) ** batch
    total = 0.0
    seen: set[int] = set()
    for name, module in model.named_modules():
        size = _module_bytes(module, seen)
        if not size:
            continue
        if isinstance(module, torch.nn.Embedding):
            total += size * min(batch, module.num_embeddings) / module.num_embeddings
        elif EXPERT.search(name + "."):
            total += size * touched
        else:
            total += size
    total += batch * context * kv_layout_for(config, kv_dtype).cell_size
    return int(total)


def measured(serving: dict, arch: str, server: str, concurrency: int) -> dict | None:
    """Ember's decode rate in a serving run at ``concurrency``: medians over the repeats.

    Each running request gets one token per step, so decode tokens/s is ``batch / ITL`` with
    ``batch`` the running batch the server reported (sampled from /metrics): below the
    concurrency when the KV pages hold fewer requests (BF16 KV at 64). Runs from before the
    sampler existed fall back to the concurrency.
    """
    rows = [
        row
        for row in serving.get("archs", {}).get(arch, {}).get("runs", [])
        if row["server"] == server and row["concurrency"] == concurrency
    ]
    if not rows:
        return None
    batches = [(row.get("running_batch") or {}).get("median", concurrency) for row in rows]
    batch = min(statistics.median(batches), concurrency)
    itl = statistics.median(row["itl_ms"]["mean"] for row in rows) / 1000
    return {
        "runs": len(rows),
        "running_batch": batch,
        "itl_mean_ms": itl * 1000,
        "decode_tokens_per_s": batch / itl if itl else None,
        "output_tokens_per_s": statistics.median(row["output_tokens_per_s"] for row in rows),
        # The server had a fraction of a core on the shared machine; per CPU-second is the rate
        # it would reach with a whole core to itself (prefill included, so a lower bound).
        "output_tokens_per_server_cpu_s": statistics.median(
            row.get("output_tokens_per_server_cpu_s", float("nan")) for row in rows
        ),
    }


def roofline_row(
    model: torch.nn.Module,
    config,
    batch: float,
    context: int,
    kv_dtype: str,
    bandwidths: dict[str, dict[str, float]],
) -> dict:
    """Bytes per decode step at ``batch`` and the tokens/s each bandwidth allows."""
    step = bytes_per_step(model, config, batch, context, kv_dtype)
    row: dict = {"batch": batch, "bytes_per_step": step}
    for where, figures in bandwidths.items():
        row[f"roofline_tok_s_{where}"] = batch * figures["copy_gb_s"] * 1e9 / step
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=list(ARCHS), choices=ARCHS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--context", type=int, default=192, help="mean tokens per sequence")
    parser.add_argument("--serving", default=str(REPO / "bench" / "results" / "serving.json"))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "roofline.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = load_average()
    bw = {
        "dram_1GiB": bandwidth(2**30, 5),
        "cache_32MiB": bandwidth(32 * 2**20, 50),
    }
    print(json.dumps(bw), flush=True)
    serving_path = Path(args.serving)
    serving = json.loads(serving_path.read_text()) if serving_path.is_file() else {}
    scratch = Path(tempfile.mkdtemp(prefix="ember-roofline-"))
    report: dict = {"threads": args.threads, "load": load, "bandwidth": bw, "archs": {}}
    for arch in args.arch:
        directory, trained = checkpoint(ARCHS[arch], scratch)
        rows = []
        for weights, kv_dtype, server in (
            ("bf16", "bf16", "bf16"),
            ("bf16", "fp8_e4m3", "fp8"),
            ("int4", "fp8_e4m3", "int4-fp8"),
        ):
            loaded = load_model(directory, dtype=torch.bfloat16)
            if weights == "int4":
                quantize_model(loaded.model, QuantConfig.from_flag("int4", targets="experts"))
            for concurrency in args.batches:
                got = measured(serving, arch, server, concurrency)
                batch = got["running_batch"] if got else concurrency
                row = {
                    "weights": weights,
                    "kv_cache_dtype": kv_dtype,
                    "server": server,
                    "concurrency": concurrency,
                    **roofline_row(loaded.model, loaded.config, batch, args.context, kv_dtype, bw),
                }
                if got is not None and got["decode_tokens_per_s"]:
                    row["ember"] = got
                    for where in bw:
                        roof = row[f"roofline_tok_s_{where}"]
                        row[f"fraction_of_{where}_roofline"] = got["decode_tokens_per_s"] / roof
                        row[f"cpu_fraction_of_{where}_roofline"] = (
                            got["output_tokens_per_server_cpu_s"] / roof
                        )
                rows.append(row)
                print(arch, json.dumps(row), flush=True)
        report["archs"][arch] = {"trained_weights": trained, "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
