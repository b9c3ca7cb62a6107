"""The engines and workloads the KV integrity tests share: a toy model per attention kind, a few
random prompts with their fault-free greedy outputs, and an engine with small pages and a short
sample period so that every check runs within a few steps."""

from __future__ import annotations

import random

import numpy as np

from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import Sequence, StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel, greedy_reference

PAGE = 4
KINDS = ["gqa", "mla", "dsa"]  # the ``case`` fixture's params in every integrity test module


def make_engine(model: ToyModel, integrity: str, **overrides: object) -> LLMEngine:
    options: dict = dict(
        max_total_tokens=400,
        page_size=PAGE,
        max_num_seqs=8,
        integrity=integrity,
        integrity_sample_period=4,
        max_integrity_retries=50,
    )
    options.update(overrides)
    return LLMEngine(model, model.kv_layout(), EngineConfig(**options))


def make_case(kind: str) -> tuple[ToyModel, list[list[int]], list[list[int]]]:
    """``(model, prompts, want)``: four random prompts and their 16 greedy reference tokens."""
    model = ToyModel(ToyConfig(kind=kind), seed=11)
    rng = random.Random(5)
    prompts = [[rng.randrange(97) for _ in range(rng.randint(5, 14))] for _ in range(4)]
    return model, prompts, [greedy_reference(model, p, 16) for p in prompts]


def add_extended(
    engine: LLMEngine, prompts: list[list[int]], rng: random.Random, max_tokens: int
) -> None:
    """Add request ``str(i)`` for each prompt, extended by one token drawn from ``rng``."""
    for i, prompt in enumerate(prompts):
        engine.add_request(
            str(i), prompt + [rng.randrange(97)], StopCriteria(max_tokens=max_tokens)
        )


def computed_slots(seq: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, slots)`` of every token ``seq`` has computed, in position order."""
    positions = np.arange(seq.num_computed_tokens)
    table = np.array(seq.block_table, dtype=np.int64)
    return positions, table[positions // PAGE] * PAGE + positions % PAGE


def compare_stamps_with_memory(engine: LLMEngine) -> int:
    """Assert that every slot a running request has computed carries the digest of its bytes
    read back from memory (the reference) and its position; return how many were compared."""
    sidecar = engine.pool.sidecar
    assert sidecar is not None
    compared = 0
    for seq in engine.scheduler.running:
        positions, slots = computed_slots(seq)
        assert np.array_equal(sidecar.digest[slots], sidecar.content_digest(slots))
        assert np.array_equal(sidecar.position[slots], positions.astype(np.int32))
        compared += len(slots)
    return compared
