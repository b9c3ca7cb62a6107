"""Constrained decoding cost per decode step: token-mask computation and matcher advance.

The vocabulary is a byte-level BPE of 8192 tokens (special tokens included) trained here on the
Python standard library's own source (a few seconds, deterministic), or a shipped tokenizer.json
(``--tokenizer``). Realistic outputs (JSON documents, Kimi and GLM tool calls, a reasoning block)
are tokenized and replayed through a ConstrainedDecoder, timing ``allowed_token_mask()`` and
``advance()`` at every step: first on a fresh grammar (every state is new the first time it is
met) and again with the grammar's caches warm (what every later request with the same schema
sees). A random walk over allowed tokens stresses many distinct states. The slow reference mask
(every token fed through the uncached matcher) is timed on the same states, and so is applying
64 masks to a (64, V) logits batch with torch.

    python bench/constrained.py [--tokenizer tokenizer.json] [--out bench/results/constrained.json]
        [--plot bench/results/constrained.png]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import statistics
import sys
import sysconfig
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ember.models.constrain.grammar import Grammar  # noqa: E402
from ember.models.constrain.masks import compute_mask, reference_mask  # noqa: E402
from ember.models.constrain.session import (  # noqa: E402
    ConstrainedDecoder,
    ConstraintSpec,
    GrammarCache,
    build_root,
)
from ember.models.constrain.tool_grammars import GLM_MARKERS, KIMI_MARKERS, ToolSignature  # noqa: E402
from ember.models.constrain.vocab import TokenVocabulary  # noqa: E402

EOS = "<|endoftext|>"
SPECIALS = [EOS, *KIMI_MARKERS, *GLM_MARKERS, "<think>", "</think>"]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "capital": {"type": "string"},
        "population": {"type": "integer"},
        "area_km2": {"type": "number"},
        "landlocked": {"type": "boolean"},
        "continent": {"enum": ["Africa", "Asia", "Europe", "Americas", "Oceania"]},
        "languages": {"type": "array", "items": {"type": "string"}},
        "leader": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "since": {"type": "integer"}},
            "required": ["title"],
        },
    },
    "required": ["name", "capital", "languages"],
}
DOCS = [
    {
        "name": "India",
        "capital": "New Delhi",
        "population": 1428627663,
        "area_km2": 3287263.0,
        "landlocked": False,
        "continent": "Asia",
        "languages": ["Hindi", "English", "Bengali", "Telugu"],
        "leader": {"title": "Prime Minister", "since": 2014},
    },
    {
        "name": "Switzerland",
        "capital": "Bern",
        "population": 8796669,
        "landlocked": True,
        "continent": "Europe",
        "languages": ["German", "French", "Italian", "Romansh"],
    },
    {
        "name": "Perú",
        "capital": "Lima",
        "area_km2": 1285216.2,
        "continent": "Americas",
        "languages": ["Spanish", "Quechua", "Aymara"],
        "leader": {"title": "Presidenta"},
    },
    {
        "name": "日本",
        "capital": "東京",
        "population": 124516650,
        "languages": ["日本語"],
        "leader": {"title": '内閣総理大臣 "Prime Minister"', "since": 2024},
    },
]
WEATHER = ToolSignature(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "units": {"enum": ["metric", "imperial"]},
        },
        "required": ["city"],
    },
)
SEARCH = ToolSignature("search", {"type": "object", "properties": {"query": {"type": "string"}}})
REASONING = (
    "The user asks for the weather in Paris over the next three days. I should call the "
    "weather tool with the city and the number of days, in metric units since they wrote in "
    "French earlier; nothing else is needed before the call."
)


def train_vocabulary(size: int) -> tuple[object, TokenVocabulary, dict]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(stdlib.glob("*.py")):
        texts.append(path.read_text(encoding="utf-8", errors="replace"))
        total += len(texts[-1])
        if total > 4_000_000:
            break
    start = time.perf_counter()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        special_tokens=SPECIALS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(texts, trainer)
    seconds = time.perf_counter() - start
    vocab = TokenVocabulary.from_tokenizer_json(json.loads(tokenizer.to_str()), eos_tokens=[EOS])
    return (
        tokenizer,
        vocab,
        {
            "source": "BPE trained on the stdlib",
            "corpus_chars": total,
            "train_seconds": round(seconds, 2),
        },
    )


def load_vocabulary(path: str) -> tuple[object, TokenVocabulary, dict]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(path)
    data = json.loads(pathlib.Path(path).read_text())
    added = {t["content"] for t in data.get("added_tokens", [])}
    eos = [t for t in ("<|endoftext|>", "<|im_end|>", "<|user|>", "[EOS]") if t in added][:1]
    vocab = TokenVocabulary.from_tokenizer_json(data, eos_tokens=eos)
    return tokenizer, vocab, {"source": path}


def stats(values: list[float]) -> dict:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "mean": round(statistics.fmean(values), 4),
        "p50": round(pick(0.5), 4),
        "p90": round(pick(0.9), 4),
        "p99": round(pick(0.99), 4),
        "max": round(ordered[-1], 4),
    }


def replay(decoder: ConstrainedDecoder, ids: list[int]) -> tuple[list[float], list[float]]:
    masks, advances = [], []
    for token in ids:
        start = time.perf_counter()
        mask = decoder.allowed_token_mask()
        middle = time.perf_counter()
        if not mask.allows(token):
            raise AssertionError(
                f"grammar refused token {token} ({decoder.vocab.token_text(token)!r})"
            )
        decoder.advance(token)
        masks.append((middle - start) * 1000)
        advances.append((time.perf_counter() - middle) * 1000)
    return masks, advances


def scenario(name: str, spec: ConstraintSpec, texts: list[str], tokenizer, vocab) -> dict:
    cache = GrammarCache()
    encoded = [tokenizer.encode(t).ids + [next(iter(vocab.eos_ids))] for t in texts]
    passes = {}
    for label in ("fresh", "warm"):
        masks, advances = [], []
        for ids in encoded:
            m, a = replay(cache.decoder(spec, vocab), ids)
            masks += m
            advances += a
        passes[label] = {
            "steps": len(masks),
            "mask_ms": stats(masks),
            "advance_ms": stats(advances),
        }
    grammar = cache.grammar(spec, vocab)
    return {"name": name, "documents": len(texts), **passes, "states": len(grammar.states)}


def random_walk(spec: ConstraintSpec, vocab: TokenVocabulary, steps: int, seed: int) -> dict:
    rng = random.Random(seed)
    decoder = GrammarCache().decoder(spec, vocab)
    masks, taken, restarts = [], 0, 0
    quote = {t for t, data in enumerate(vocab.tokens) if data and (b'"' in data or b"}" in data)}
    while taken < steps:
        if decoder.is_finished:
            decoder = ConstrainedDecoder(decoder.grammar, vocab)
            restarts += 1
        start = time.perf_counter()
        allowed = decoder.allowed_token_mask().token_ids()
        masks.append((time.perf_counter() - start) * 1000)
        closers = [t for t in allowed if t in quote or t in vocab.eos_ids]
        decoder.advance(rng.choice(closers if closers and rng.random() < 0.3 else allowed))
        taken += 1
    return {
        "name": "random_walk_json_schema",
        "steps": steps,
        "documents": restarts,
        "mask_ms": stats(masks),
        "states": len(decoder.grammar.states),
    }


def reference_ratio(spec: ConstraintSpec, text: str, tokenizer, vocab, samples: int) -> dict:
    ids = tokenizer.encode(text).ids
    walker = GrammarCache().decoder(spec, vocab)
    states = []
    for token in ids:
        states.append(walker.state)
        walker.advance(token)
    picked = states[:: max(1, len(states) // samples)][:samples]
    fast, slow = [], []
    for state in picked:
        grammar = Grammar(build_root(spec, vocab.special_ids))  # cold: no cached transitions
        start = time.perf_counter()
        mask = compute_mask(grammar, vocab, grammar.intern(state))
        fast.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        expected = reference_mask(state, vocab)
        slow.append((time.perf_counter() - start) * 1000)
        assert mask == expected
    return {
        "states": len(picked),
        "fast_cold_ms": stats(fast),
        "reference_ms": stats(slow),
        "reference_over_fast_cold": round(statistics.fmean(slow) / statistics.fmean(fast), 1),
    }


def torch_apply(vocab: TokenVocabulary, batch: int) -> dict:
    import torch

    from ember.models.constrain.torch_masks import apply_token_masks

    decoder = GrammarCache().decoder(ConstraintSpec(json="schema", schema=SCHEMA), vocab)
    masks = [decoder.allowed_token_mask()] * batch
    logits = torch.randn(batch, vocab.size)
    default_threads = torch.get_num_threads()
    out: dict = {"batch": batch, "vocab": vocab.size, "torch": torch.__version__}
    for threads in sorted({1, default_threads}):
        torch.set_num_threads(threads)
        times = []
        for _ in range(60):
            start = time.perf_counter()
            apply_token_masks(logits, masks)
            times.append((time.perf_counter() - start) * 1000)
        out[f"apply_ms_{threads}_threads"] = stats(times[10:])
    torch.set_num_threads(default_threads)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tokenizer", help="a byte-level BPE tokenizer.json to use instead of training one"
    )
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "constrained.json"))
    parser.add_argument(
        "--plot", default=None, help="also draw a figure (needs the bench extra: matplotlib)"
    )
    args = parser.parse_args()
    if args.tokenizer:
        tokenizer, vocab, origin = load_vocabulary(args.tokenizer)
    else:
        tokenizer, vocab, origin = train_vocabulary(args.vocab_size)
    compact = [json.dumps(d, ensure_ascii=False) for d in DOCS]
    pretty = [json.dumps(d, ensure_ascii=False, indent=2) for d in DOCS]
    kimi = [
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Paris", "days": 3, "units": "metric"}<|tool_call_end|><|tool_calls_section_end|>'
    ]
    glm = [
        REASONING + "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris, France"
        "</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
    ]
    schema_spec = ConstraintSpec(json="schema", schema=SCHEMA)
    results = {
        "vocabulary": {
            **origin,
            "size": vocab.size,
            "special": len(vocab.special),
            "trie_nodes": len(vocab.trie),
        },
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
        "scenarios": [
            scenario("json_schema_compact", schema_spec, compact, tokenizer, vocab),
            scenario("json_schema_pretty", schema_spec, pretty, tokenizer, vocab),
            scenario(
                "json_object", ConstraintSpec(json="object"), compact + pretty, tokenizer, vocab
            ),
            scenario(
                "kimi_tool_required",
                ConstraintSpec(tools=(WEATHER, SEARCH), tools_required=True, tool_format="kimi"),
                kimi,
                tokenizer,
                vocab,
            ),
            scenario(
                "glm47_reasoning_then_tool",
                ConstraintSpec(
                    tools=(WEATHER, SEARCH),
                    tools_required=True,
                    tool_format="glm47",
                    reasoning="inside",
                ),
                glm,
                tokenizer,
                vocab,
            ),
        ],
        "random_walk": random_walk(schema_spec, vocab, 600, seed=0),
        "reference": reference_ratio(schema_spec, pretty[0], tokenizer, vocab, samples=12),
        "torch_apply": torch_apply(vocab, 64),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    for s in results["scenarios"]:
        fresh, warm = s["fresh"], s["warm"]
        print(
            f"{s['name']:28s} steps {fresh['steps']:4d}  mask ms: fresh mean "
            f"{fresh['mask_ms']['mean']:7.3f} p99 {fresh['mask_ms']['p99']:7.3f} | warm mean "
            f"{warm['mask_ms']['mean']:6.3f} p99 {warm['mask_ms']['p99']:6.3f}"
            f" | advance {warm['advance_ms']['mean']:.4f}"
        )
    walk, ref = results["random_walk"], results["reference"]
    print(f"random walk: {walk['steps']} steps, mask ms {walk['mask_ms']}")
    print(f"reference / fast (fresh) = {ref['reference_over_fast_cold']}x, {ref['states']} states")
    print(f"torch apply (64 x {vocab.size}): {results['torch_apply']}")
    if args.plot:
        plot(results, args.plot)
    print(f"wrote {out}")


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["name"] for s in results["scenarios"]]
    cold = [s["fresh"]["mask_ms"]["mean"] for s in results["scenarios"]]
    warm = [s["warm"]["mask_ms"]["mean"] for s in results["scenarios"]]
    p99 = [s["fresh"]["mask_ms"]["p99"] for s in results["scenarios"]]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = range(len(names))
    ax.bar([i - 0.27 for i in x], cold, 0.27, label="fresh grammar: mean")
    ax.bar(list(x), p99, 0.27, label="fresh grammar: p99")
    ax.bar([i + 0.27 for i in x], warm, 0.27, label="warm grammar: mean")
    ax.set_xticks(list(x), [n.replace("_", "\n", 1) for n in names], fontsize=7)
    ax.set_ylabel("ms per decode step (log)")
    ax.set_yscale("log")
    ax.set_title(f"Token-mask computation, vocab {results['vocabulary']['size']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
