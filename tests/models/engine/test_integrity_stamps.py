"""Deferred KV content stamps against the reference, every slot's digest read back from memory:
stamps of several steps flushed together, a prefill chunk stamped at its own step, and the
store kernel's sums (and the torch stores') kept between flushes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ember.models.engine.sequence import StopCriteria
from tests.models.engine.integrity_cases import (
    KINDS,
    add_extended,
    compare_stamps_with_memory,
    make_case,
    make_engine,
)


@pytest.fixture(scope="module", params=KINDS)
def case(request: pytest.FixtureRequest):
    return make_case(request.param)


def test_deferred_content_stamps_equal_the_digests_of_memory(case) -> None:
    """The deferred stamps (several steps' written tensors digested in one flush: one stack per
    shape when the steps stored the same shapes, a concatenation otherwise; stamps of pages
    cleared since dropped) against the reference, every slot read back from memory: after
    every step's flush, every slot a running request has computed carries its memory digest."""
    model, prompts, _ = case
    engine = make_engine(model, "sampled", integrity_sample_period=1 << 10)
    checker, sidecar = engine.checker, engine.pool.sidecar
    assert checker is not None and sidecar is not None
    rng = random.Random(3)
    add_extended(engine, prompts, rng, 10)
    compared = 0
    while engine.has_unfinished():
        engine.step()
        if rng.random() < 0.5:
            continue  # let stamps of several steps wait for one flush
        checker.flush()
        compared += compare_stamps_with_memory(engine)
    assert compared > 100 and engine.stats.integrity_failures == 0


def test_a_prefill_chunk_is_stamped_at_its_own_step(case) -> None:
    """A step that writes a prefill chunk digests its content stamps itself (no flush asked):
    a chunk's stamps left pending were digested at the first decode sample step, which then
    paid for a whole prefill. Against the reference: every prompt slot's stamp equals the
    digest of its bytes read from memory right after the prefill steps."""
    model, prompts, _ = case
    engine = make_engine(model, "sampled", integrity_sample_period=1 << 10)
    sidecar = engine.pool.sidecar
    assert sidecar is not None
    engine.add_request("0", prompts[0], StopCriteria(max_tokens=4))
    engine.step()  # step 0 is a content sample step, which flushes anyway
    for i, prompt in enumerate(prompts[1:], 1):
        engine.add_request(str(i), prompt, StopCriteria(max_tokens=4))
    engine.step()  # step 1 (no sample): request 0 decodes, the others prefill
    assert compare_stamps_with_memory(engine) >= sum(len(p) for p in prompts)


@pytest.mark.parametrize(
    "path", [pytest.param("kernel, buffer replaced", marks=pytest.mark.kernels), "torch stores"]
)
def test_stamps_summed_by_the_store_kernel_equal_the_digests_of_memory(case, path: str) -> None:
    """The store kernel's sums (``kernels/stored_sums.py``), kept in the runner's reused buffer
    between flushes, against the reference read back from memory; with a buffer too small for
    a flush window (replaced while steps wait: their runs no longer follow each other), and
    with the torch stores (the reference path, kernel off) for the same steps."""
    model, prompts, _ = case
    engine = make_engine(model, "sampled", integrity_sample_period=1 << 10)
    checker, sidecar, runner = engine.checker, engine.pool.sidecar, engine.runner
    assert checker is not None and sidecar is not None
    if path == "torch stores":
        runner.workspace.store_kernel = None
    else:
        assert runner.workspace.store_kernel is not None, "the test machine has a C compiler"
    rng = random.Random(5)
    add_extended(engine, prompts, rng, 12)
    compared = replaced = 0
    while engine.has_unfinished():
        if path != "torch stores" and rng.random() < 0.4:
            runner._sums = np.empty(1, dtype=np.int64)  # full: the next step replaces it
            replaced += 1
        engine.step()
        if rng.random() < 0.6:
            continue  # let stamps of several steps wait for one flush
        checker.flush()
        compared += compare_stamps_with_memory(engine)
    assert compared > 100 and engine.stats.integrity_failures == 0
    assert path == "torch stores" or replaced > 2
