"""The token stream a checkpoint trains on: corpus files and chat examples, packed into windows.

Documents are the training files (``doc_start + text + doc_end``; the text is encoded with special
tokens disabled, so source text can never smuggle in a control token) and the chat examples (their
templated text, control tokens included, then ``doc_end``). Documents are shuffled with a fixed
seed, concatenated and cut into windows of ``seq_len + 1`` tokens; each epoch visits the windows
in a fixed permuted order. Everything is a pure function of the corpus, the tokenizer and the seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from ember.models.tokenizer import Tokenizer
from ember.models.training.chat_format import example_text
from ember.models.training.corpus import CorpusSplit
from ember.models.training.families import ChatFamily
from ember.models.training.functions import documented_functions
from ember.models.training.instructions import ChatExample, instruction_examples
from ember.models.training.tool_examples import tool_examples


@dataclass(frozen=True, slots=True)
class DataStats:
    corpus_documents: int
    corpus_tokens: int
    chat_documents: int
    chat_tokens: int
    windows: int


def chat_examples(split: CorpusSplit, seed: int) -> list[ChatExample]:
    functions = [fn for f in split.train for fn in documented_functions(f)]
    return instruction_examples(functions, seed) + tool_examples(split.train, functions, seed)


def markers(tokenizer: Tokenizer, text: str) -> list[int]:
    """Ids of a string made only of special tokens (e.g. ``[gMASK]<sop>``)."""
    ids = tokenizer.encode(text)
    if any(i not in tokenizer.special_ids for i in ids):
        raise ValueError(f"{text!r} is not made of special tokens")
    return ids


def document_tokens(
    tokenizer: Tokenizer, family: ChatFamily, split: CorpusSplit, seed: int
) -> tuple[list[list[int]], DataStats]:
    start, end = markers(tokenizer, family.doc_start), markers(tokenizer, family.doc_end)
    corpus = [start + tokenizer.encode(f.text, allow_special=False) + end for f in split.train]
    chats = [
        tokenizer.encode(example_text(tokenizer, family, ex)) + end
        for ex in chat_examples(split, seed)
    ]
    stats = DataStats(
        corpus_documents=len(corpus),
        corpus_tokens=sum(map(len, corpus)),
        chat_documents=len(chats),
        chat_tokens=sum(map(len, chats)),
        windows=0,
    )
    return corpus + chats, stats


def pack(documents: Sequence[Sequence[int]], seq_len: int, seed: int) -> torch.Tensor:
    """Shuffle documents, concatenate, cut into (N, seq_len + 1) windows (the tail is dropped)."""
    order = list(range(len(documents)))
    random.Random(f"pack:{seed}").shuffle(order)
    flat = [t for i in order for t in documents[i]]
    n = len(flat) // (seq_len + 1)
    return torch.tensor(flat[: n * (seq_len + 1)], dtype=torch.int64).view(n, seq_len + 1)


def batches(windows: torch.Tensor, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """Endless (batch_size, seq_len + 1) batches; every epoch is a fixed permutation."""
    epoch = 0
    while True:
        gen = torch.Generator().manual_seed(seed * 1000 + epoch)
        perm = torch.randperm(len(windows), generator=gen)
        for i in range(0, len(perm) - batch_size + 1, batch_size):
            yield windows[perm[i : i + batch_size]]
        epoch += 1
