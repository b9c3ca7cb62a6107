"""Measure a trained checkpoint: held-out bits per byte against the byte-unigram baseline,
bits per byte of chat answers to held-out requests, and greedy chat samples."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ember.models.training.chat_format import prompt_text
from ember.models.training.configs import SEQ_LEN
from ember.models.training.corpus import load_manifest
from ember.models.training.evaluate import (
    answer_texts,
    bits_per_byte,
    byte_unigram_baseline,
    greedy,
    heldout_texts,
)
from ember.models.training.functions import documented_functions
from ember.models.training.instructions import ChatExample, instruction_example
from ember.models.training.pipeline import TRAIN_MANIFEST, heldout_files, load_shipped, specs
from ember.models.training.tool_examples import GET_SOURCE

STRIDE = SEQ_LEN // 2
SAMPLE_TOKENS = 160


def training_byte_counts() -> list[int]:
    """The training corpus's byte histogram, as recorded (machine-independent)."""
    return list(load_manifest(TRAIN_MANIFEST)["byte_counts"])  # type: ignore[arg-type]


def heldout_chat_examples(seed: int = 0, thinking: bool = False) -> list[ChatExample]:
    """Instruction examples made from the held-out files' functions (never trained on)."""
    out = []
    for f in heldout_files():
        for fn in documented_functions(f):
            ex = instruction_example(fn, seed)
            target = {k: v for k, v in ex.target.items() if k != "reasoning_content"}
            out.append(ChatExample(ex.prefix, target, None, thinking))
    return out


def sample_requests() -> list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]]:
    """Fixed chat prompts: three held-out docstrings as requests, and one with a tool offered."""
    fns = [fn for f in heldout_files() for fn in documented_functions(f) if fn.name[0] != "_"]
    picks = [fns[len(fns) * i // 3] for i in range(3)]
    chats: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = [
        ([{"role": "user", "content": f"Write a Python function `{fn.name}`: {fn.request}"}], None)
        for fn in picks
    ]
    tool_fn = picks[0]
    chats.append(
        (
            [
                {
                    "role": "user",
                    "content": f"Show me the source of `{tool_fn.module}.{tool_fn.qualname}`.",
                }
            ],
            [GET_SOURCE],
        )
    )
    return chats


def evaluate_checkpoint(
    name: str, directory: Path | None = None, *, max_bytes: int | None = None, samples: bool = True
) -> dict[str, Any]:
    spec = specs()[name]
    model, tokenizer = load_shipped(name, directory)
    started = time.perf_counter()
    heldout = heldout_files()
    texts = heldout_texts(tokenizer, spec.family, heldout, max_bytes)
    result: dict[str, Any] = {
        "checkpoint": name,
        "context": SEQ_LEN,
        "stride": STRIDE,
        "heldout": bits_per_byte(model, texts, SEQ_LEN, STRIDE).to_json(),
        "byte_unigram_baseline": byte_unigram_baseline(training_byte_counts(), heldout),
    }
    if max_bytes is None:
        answers = answer_texts(tokenizer, spec.family, heldout_chat_examples())
        result["heldout_chat_answers"] = bits_per_byte(model, answers, SEQ_LEN, STRIDE).to_json()
    if samples:
        stop = {tokenizer.token_id(t) for t in spec.family.stop_tokens}
        result["samples"] = []
        for messages, tools in sample_requests():
            ex = ChatExample(tuple(messages), {}, tuple(tools) if tools else None, thinking=False)
            prompt = tokenizer.encode(prompt_text(tokenizer, ex))
            out = greedy(model, prompt, stop, SAMPLE_TOKENS, SEQ_LEN)
            result["samples"].append(
                {"messages": messages, "tools": bool(tools), "output": tokenizer.decode(out)}
            )
    result["eval_wall_s"] = time.perf_counter() - started
    return result
