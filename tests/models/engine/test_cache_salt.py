"""``cache_salt`` (vLLM's field): requests with different salts never share a prefix-cache page,
equal salts do, and a request without a salt never reuses a salted page (nor the reverse).

review22: pages were keyed by the tokens alone, so on ``ember serve`` one account learnt from its
own ``cached_tokens`` whether another account's prompt started with its guess, page by page.
"""

from __future__ import annotations

import pytest

from ember.errors import InvalidModelInput
from ember.models.engine.block_manager import BlockManager
from ember.models.engine.config import EngineConfig
from ember.models.engine.engine_types import RequestOutput
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import Sequence, StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel

STOP = StopCriteria(max_tokens=4)
PROMPT = list(range(1, 14))  # three full pages of 4, and one token left to compute


def _seq(seq_id: int, tokens: list[int], salt: str | None) -> Sequence:
    return Sequence(seq_id, f"r{seq_id}", tokens, STOP, cache_salt=salt)


def _prefill(manager: BlockManager, seq: Sequence) -> list[int]:
    """Admit ``seq`` with what the cache offers it, pretend its forward ran, register its pages;
    the pages it reused."""
    matched = manager.match_prefix(seq)
    manager.admit(seq, matched, seq.num_tokens - len(matched) * manager.page_size)
    seq.num_computed_tokens = seq.num_tokens
    manager.commit(seq)
    return matched


def test_different_salts_never_share_a_page_and_equal_salts_do() -> None:
    manager = BlockManager(64, 4)
    first = _seq(0, PROMPT, "tenant-a")
    assert _prefill(manager, first) == []
    assert _prefill(manager, _seq(1, PROMPT, "tenant-b")) == []
    assert _prefill(manager, _seq(2, PROMPT, None)) == [], "no salt never reads a salted page"
    assert _prefill(manager, _seq(3, PROMPT, "tenant-a")) == first.block_table[:3]
    # The unsalted request registered its own pages: a later unsalted one reuses them, a salted
    # one still does not.
    unsalted = _seq(4, PROMPT, None)
    assert len(_prefill(manager, unsalted)) == 3
    assert not set(unsalted.block_table) & set(first.block_table)


def test_the_salt_changes_the_chain_from_the_first_token() -> None:
    a, b, none = (_seq(i, PROMPT, s) for i, s in enumerate(("a", "b", None)))
    assert all(x != y for x, y in zip(a.chain, b.chain, strict=True))
    assert all(x != y for x, y in zip(a.chain, none.chain, strict=True))
    assert list(_seq(5, PROMPT, "a").chain) == list(a.chain)
    # Appending tokens keeps the salted chain: the decode's pages are keyed the same way.
    grown = _seq(6, PROMPT[:-1], "a")
    grown.append_token(PROMPT[-1])
    assert list(grown.chain) == list(a.chain)


def test_a_forged_key_from_another_salt_is_still_a_miss() -> None:
    """A page is matched by its salt itself, not only by a hash that carries it: a collision
    between two tenants' chains (forged here) can cost a miss, never a cross-tenant hit."""
    manager = BlockManager(16, 4)
    owner = _seq(0, PROMPT, "tenant-a")
    _prefill(manager, owner)
    other = _seq(1, PROMPT, "tenant-b")
    for i in range(3):
        manager._cached[int(other.chain[(i + 1) * 4 - 1])] = owner.block_table[i]
    assert manager.match_prefix(other) == []


def _usage(engine: LLMEngine, request_id: str, salt: str | None) -> tuple[int, tuple[int, ...]]:
    """Run one request to its end alone: its cached prompt tokens and its tokens."""
    engine.add_request(request_id, PROMPT * 3, StopCriteria(max_tokens=6), cache_salt=salt)
    outputs: list[RequestOutput] = []
    while engine.has_unfinished():
        outputs += [o for o in engine.step() if o.request_id == request_id]
    assert outputs[-1].finished and outputs[-1].error is None
    tokens = tuple(t for o in outputs for t in o.new_token_ids)
    return outputs[-1].usage.cached_tokens, tokens


@pytest.mark.parametrize(("kind", "integrity"), [("gqa", "full"), ("mla", "sampled")])
def test_the_engine_reports_hits_within_a_salt_only(kind: str, integrity: str) -> None:
    model = ToyModel(ToyConfig(kind=kind), seed=3)
    config = EngineConfig(max_total_tokens=512, page_size=4, integrity=integrity)
    engine = LLMEngine(model, model.kv_layout(), config)
    cached, plain = _usage(engine, "a1", "tenant-a")
    assert cached == 0
    assert _usage(engine, "b1", "tenant-b") == (0, plain), "another salt: a miss, same answer"
    assert _usage(engine, "n1", None) == (0, plain)
    assert _usage(engine, "a2", "tenant-a") == (36, plain), "its own repeat hits 9 pages"
    assert _usage(engine, "b2", "tenant-b") == (36, plain)
    assert _usage(engine, "n2", None) == (36, plain)
    assert engine.stats.integrity_failures == 0


def test_a_salt_that_is_not_a_string_is_refused() -> None:
    model = ToyModel(ToyConfig(kind="gqa"), seed=3)
    engine = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=64, page_size=4))
    with pytest.raises(InvalidModelInput) as refused:
        engine.add_request("x", PROMPT, STOP, cache_salt=7)  # type: ignore[arg-type]
    assert refused.value.field == "cache_salt"
    # The refusal left nothing behind: a valid request under the same id still runs.
    engine.add_request("x", PROMPT, STOP, cache_salt="ok")
    while engine.has_unfinished():
        engine.step()
