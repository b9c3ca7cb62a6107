"""Cost of one sampling step: the batched sampler at batch 1 and 64, tiny and real vocabularies.

Vocabularies: 8192 (the tiny checkpoints) and 154,880 (GLM-5.x). Parameter mixes: all greedy;
temperature only (no sort); top-p 0.95; and everything at once (top-k 50, top-p 0.9, min-p,
repetition/frequency/presence penalties over 256 generated tokens, logit bias, 5 top logprobs).
Logits are N(0, 8^2), peaked as next-token distributions usually are (at temperature 0.8 the
top-p 0.95 set holds 1-21 tokens, median 3-6, inside the sampler's 1024 candidates); "top-p 0.95,
flat" uses N(0, 1) logits, whose top-p set is 65% of the vocabulary, so every row falls back to a
full sort (the worst case). The per-row Python reference is timed on one row of the small
vocabulary, for scale. Each case is timed interleaved with the others, in CPU time of this process
(waiting for a core on the shared box is not counted); the fastest of the rounds is reported.

    python bench/sampling.py [--rounds 7] [--threads 1] [--out bench/results/sampling.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from ember.models.sampling import (  # noqa: E402
    Sampler,
    SamplingParams,
    SamplingState,
    sample_row_reference,
)

VOCABS = (8192, 154_880)
BATCHES = (1, 64)
MIXES = {
    "greedy": SamplingParams(temperature=0.0),
    "temperature only": SamplingParams(temperature=0.8),
    "top-p 0.95": SamplingParams(temperature=0.8, top_p=0.95),
    "top-p 0.95, flat": SamplingParams(temperature=0.8, top_p=0.95),
    "everything": SamplingParams(
        temperature=0.8,
        top_k=50,
        top_p=0.9,
        min_p=0.01,
        repetition_penalty=1.1,
        frequency_penalty=0.3,
        presence_penalty=0.3,
        logit_bias=((1, 2.0), (2, -5.0)),
        logprobs=True,
        top_logprobs=5,
    ),
}


def _states(params: SamplingParams, batch: int, vocab: int) -> list[SamplingState]:
    rng = random.Random(0)
    states = []
    for row in range(batch):
        seeded = SamplingParams(**{**_fields(params), "seed": row})
        prompt = [rng.randrange(vocab) for _ in range(128)]
        state = SamplingState.create(seeded, vocab, prompt)
        for _ in range(256 if params.has_penalties else 0):
            state.append(rng.randrange(vocab))
        states.append(state)
    return states


def _fields(params: SamplingParams) -> dict:
    return {name: getattr(params, name) for name in params.__dataclass_fields__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "sampling.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    sampler = Sampler()
    cases = {}
    for vocab in VOCABS:
        for batch in BATCHES:
            noise = torch.randn(batch, vocab, generator=torch.Generator().manual_seed(1))
            for mix, params in MIXES.items():
                logits = noise if mix.endswith("flat") else noise * 8
                cases[(vocab, batch, mix)] = (logits, _states(params, batch, vocab))
    best = {key: float("inf") for key in cases}
    for logits, states in cases.values():  # warm up every shape once
        sampler(logits, states, record=False)
    for _ in range(args.rounds):
        for key, (logits, states) in cases.items():
            start = time.process_time()
            sampler(logits, states, record=False)
            best[key] = min(best[key], time.process_time() - start)
    logits, states = cases[(VOCABS[0], 1, "everything")]
    reference = float("inf")
    for _ in range(2):
        start = time.process_time()
        sample_row_reference(logits[0], states[0], record=False)
        reference = min(reference, time.process_time() - start)
    rows = [
        {"vocab": v, "batch": b, "mix": m, "ms": best[(v, b, m)] * 1e3, "us_per_row": 1e6 * s / b}
        for (v, b, m), s in ((k, best[k]) for k in cases)
    ]
    report = {
        "machine": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "clock": "process CPU time",
            "load_average_1min_before": load_before,
            "load_average_1min_after": os.getloadavg()[0],
        },
        "rounds": args.rounds,
        "steps": rows,
        "reference_one_row_ms": {"vocab": VOCABS[0], "mix": "everything", "ms": reference * 1e3},
    }
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    for row in rows:
        print(f"V={row['vocab']:<7d} B={row['batch']:<3d} {row['mix']:18s} {row['ms']:8.2f} ms")
    print(f"reference, one row, V={VOCABS[0]}, everything: {reference * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
