"""Held-out evaluation: bits per byte on the committed held-out files, against a byte-unigram
baseline, plus chat-answer bits per byte and greedy chat samples.

Bits per byte: each held-out file is ``doc_start + text`` (special tokens disabled in the text);
every text token is scored exactly once, predicted from up to ``context`` preceding tokens (a
sliding window moving ``stride`` tokens at a time); the summed negative log-likelihood, in bits,
is divided by the file's UTF-8 byte count. The baseline is the best model that ignores context: a
byte-frequency table fitted on the training files (add-one smoothing), scored on the same bytes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ember.models.arch import CausalLM
from ember.models.tokenizer import Tokenizer
from ember.models.training.chat_format import completion_text, prompt_text
from ember.models.training.corpus import SourceFile
from ember.models.training.data import markers
from ember.models.training.families import ChatFamily
from ember.models.training.instructions import ChatExample


@dataclass(frozen=True, slots=True)
class ScoredText:
    """Token ids of one text, which of them to score (from ``first_scored``), and its bytes."""

    ids: tuple[int, ...]
    first_scored: int
    num_bytes: int


@dataclass(frozen=True, slots=True)
class BitsPerByte:
    bits_per_byte: float
    bits: float
    num_bytes: int
    num_tokens: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "bits_per_byte": self.bits_per_byte,
            "bits": self.bits,
            "bytes": self.num_bytes,
            "tokens_scored": self.num_tokens,
        }


def heldout_texts(
    tokenizer: Tokenizer, family: ChatFamily, files: Sequence[SourceFile], max_bytes: int | None
) -> list[ScoredText]:
    """The held-out files as scored texts; ``max_bytes`` keeps a prefix of the set (for tests)."""
    start = markers(tokenizer, family.doc_start)
    out, total = [], 0
    for f in files:
        text = f.text
        if max_bytes is not None:
            text = text.encode("utf-8")[: max_bytes - total].decode("utf-8", errors="ignore")
        if not text:
            break
        ids = start + tokenizer.encode(text, allow_special=False)
        out.append(ScoredText(tuple(ids), len(start), len(text.encode("utf-8"))))
        total += out[-1].num_bytes
    return out


def answer_texts(
    tokenizer: Tokenizer, family: ChatFamily, examples: Sequence[ChatExample]
) -> list[ScoredText]:
    """Chat examples as scored texts: only the completion (the assistant's answer) is scored."""
    out = []
    for ex in examples:
        prompt = tokenizer.encode(prompt_text(tokenizer, ex))
        answer_text = completion_text(family, ex.target, ex.thinking)
        answer = tokenizer.encode(answer_text)
        out.append(ScoredText(tuple(prompt + answer), len(prompt), len(answer_text.encode())))
    return out


def _windows(text: ScoredText, context: int, stride: int) -> list[tuple[list[int], int]]:
    """(window ids, index in the window of the first target to score) covering each target once."""
    n = len(text.ids)
    out = []
    scored_from = max(text.first_scored, 1)
    end = min(n, max(context, scored_from + stride))
    while scored_from < n:
        start = max(0, end - context)
        out.append((list(text.ids[start:end]), scored_from - start))
        scored_from, end = end, min(n, end + stride)
    return out


@torch.no_grad()
def bits_per_byte(
    model: CausalLM,
    texts: Sequence[ScoredText],
    context: int,
    stride: int,
    batch_size: int = 8,
) -> BitsPerByte:
    if not 0 < stride < context:
        raise ValueError("need 0 < stride < context (a window must hold each target's predecessor)")
    model.eval()
    items = [w for t in texts for w in _windows(t, context, stride)]
    nats, tokens = 0.0, 0
    for i in range(0, len(items), batch_size):
        chunk = items[i : i + batch_size]
        width = max(len(ids) for ids, _ in chunk)
        batch = torch.zeros(len(chunk), width, dtype=torch.int64)
        for row, (ids, _) in enumerate(chunk):
            batch[row, : len(ids)] = torch.tensor(ids)
        logp = F.log_softmax(model.reference_forward(batch).float(), dim=-1)
        for row, (ids, first) in enumerate(chunk):
            targets = torch.tensor(ids[first:])
            picked = logp[row, first - 1 : len(ids) - 1].gather(1, targets[:, None])
            nats -= float(picked.sum())
            tokens += len(targets)
    num_bytes = sum(t.num_bytes for t in texts)
    bits = nats / math.log(2)
    return BitsPerByte(bits / num_bytes, bits, num_bytes, tokens)


def byte_unigram_baseline(
    train_byte_counts: Sequence[int], heldout: Sequence[SourceFile]
) -> dict[str, float]:
    """Bits per held-out byte of a byte-frequency model fitted on the training files (add-one
    smoothing), and the held-out set's own byte entropy (the best any context-free byte model
    could do on it)."""
    held = Counter()
    for f in heldout:
        held.update(f.text.encode("utf-8"))
    total_fit = sum(train_byte_counts) + 256
    total_held = sum(held.values())
    cross = -sum(c * math.log2((train_byte_counts[b] + 1) / total_fit) for b, c in held.items())
    own = -sum(c * math.log2(c / total_held) for c in held.values())
    return {
        "train_fitted_bits_per_byte": cross / total_held,
        "heldout_entropy_bits_per_byte": own / total_held,
        "bytes": total_held,
    }


@torch.no_grad()
def greedy(
    model: CausalLM, prompt: Sequence[int], stop_ids: set[int], max_new_tokens: int, window: int
) -> list[int]:
    """Greedy continuation (recomputes the whole window each step: slow, simple, exact)."""
    model.eval()
    ids = list(prompt)
    out: list[int] = []
    for _ in range(max_new_tokens):
        logits = model.reference_forward(torch.tensor([ids[-window:]]))
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        ids.append(nxt)
        if nxt in stop_ids:
            break
    return out
