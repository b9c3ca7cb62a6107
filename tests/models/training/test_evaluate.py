"""Bits-per-byte evaluation: every target scored once, in enough context, and the baseline."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.training.corpus import SourceFile, byte_counts
from ember.models.training.evaluate import (
    ScoredText,
    _windows,
    bits_per_byte,
    byte_unigram_baseline,
)
from tests.models import tiny


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 300),
    first=st.integers(0, 40),
    context=st.integers(2, 64),
    data=st.data(),
)
def test_windows_score_every_target_once_with_enough_context(n, first, context, data) -> None:
    stride = data.draw(st.integers(1, context - 1))
    text = ScoredText(tuple(range(n)), min(first, n - 1), 1)
    scored: list[int] = []
    for ids, at in _windows(text, context, stride):
        assert 1 <= at < len(ids) <= context
        targets = ids[at:]
        scored += targets
        # every target sees at least context - stride tokens (or everything before it)
        assert ids[0] == 0 or at >= context - stride
    assert scored == list(range(max(text.first_scored, 1), n))


def test_bits_per_byte_matches_a_direct_computation() -> None:
    torch.manual_seed(0)
    model = build_model(parse_config(tiny.kimi()))
    ids = tuple(torch.randint(0, 97, (40,)).tolist())
    text = ScoredText(ids, 3, 100)
    with torch.no_grad():
        logp = F.log_softmax(model.reference_forward(torch.tensor([ids])), -1)[0]
    nats = -sum(float(logp[i - 1, ids[i]]) for i in range(3, 40))
    expected = nats / math.log(2) / 100
    assert math.isclose(bits_per_byte(model, [text], 64, 32).bits_per_byte, expected, rel_tol=1e-5)
    windowed = bits_per_byte(model, [text], 16, 8, batch_size=3)
    assert windowed.num_tokens == 37 and windowed.bits_per_byte > 0


def test_byte_unigram_baseline() -> None:
    train = byte_counts([SourceFile("a.py", "ab" * 50, "")])
    assert train[ord("a")] == train[ord("b")] == 50 and sum(train) == 100
    held = [SourceFile("b.py", "aabb", "")]
    base = byte_unigram_baseline(train, held)
    assert math.isclose(base["heldout_entropy_bits_per_byte"], 1.0)
    assert math.isclose(base["train_fitted_bits_per_byte"], -math.log2(51 / 356))
