"""Block manager: free list, reference counts, and a prefix cache that never trusts a hash alone."""

from __future__ import annotations

from ember.models.engine.block_manager import BlockManager
from ember.models.engine.sequence import Sequence, StopCriteria

STOP = StopCriteria(max_tokens=4)


def _seq(seq_id: int, tokens: list[int]) -> Sequence:
    return Sequence(seq_id, f"r{seq_id}", tokens, STOP)


def _run_prefill(manager: BlockManager, seq: Sequence) -> None:
    """Admit ``seq``, pretend the forward cached all its tokens, register full pages."""
    matched = manager.match_prefix(seq)
    manager.admit(seq, matched, seq.num_tokens - len(matched) * manager.page_size)
    seq.num_computed_tokens = seq.num_tokens
    manager.commit(seq)


def test_allocation_and_release_round_trip() -> None:
    manager = BlockManager(8, 4)
    seq = _seq(0, list(range(10)))
    assert manager.can_admit(seq, [], 10)
    manager.admit(seq, [], 10)
    assert len(seq.block_table) == 3 and manager.num_free_pages == 5
    manager.release(seq)
    assert manager.num_free_pages == 8 and seq.block_table == []


def test_prefix_hits_share_pages_and_leave_one_token_to_compute() -> None:
    manager = BlockManager(16, 4)
    first = _seq(0, list(range(12)))
    _run_prefill(manager, first)
    second = _seq(1, list(range(12)))
    matched = manager.match_prefix(second)
    assert matched == first.block_table[:2], "the last page is left so one token runs"
    manager.admit(second, matched, 4)
    assert all(manager.pages[p].ref_count == 2 for p in matched)
    assert second.num_computed_tokens == 8


def test_freed_pages_keep_their_entry_until_reused() -> None:
    manager = BlockManager(6, 4)
    first = _seq(0, list(range(9)))
    _run_prefill(manager, first)
    cached = first.block_table[:2]
    manager.release(first)
    again = _seq(1, list(range(9)))
    assert manager.match_prefix(again) == cached
    # Filling the pool hands out every free page, cached ones last (oldest freed first).
    filler = _seq(2, [50 + i for i in range(24)])
    manager.admit(filler, [], 24)
    assert manager.match_prefix(_seq(3, list(range(9)))) == []


def test_a_colliding_key_with_different_tokens_is_a_miss() -> None:
    manager = BlockManager(8, 4)
    first = _seq(0, [1, 2, 3, 4, 5])
    _run_prefill(manager, first)
    other = _seq(1, [9, 9, 9, 9, 5])
    # Forge a collision: point the other sequence's key at the first sequence's page.
    manager._cached[int(other.chain[3])] = first.block_table[0]
    assert manager.match_prefix(other) == []


def test_a_child_page_whose_parent_was_reused_is_a_miss() -> None:
    manager = BlockManager(4, 2)
    first = _seq(0, [1, 2, 3, 4, 5])
    _run_prefill(manager, first)
    parent, child = first.block_table[0], first.block_table[1]
    manager.release(first)
    # Reuse the parent page for something else, then forge the parent's old key back at it.
    manager._free = {parent: None, **{p: None for p in manager._free if p != parent}}
    squatter = _seq(1, [7, 8])
    manager.admit(squatter, [], 2)
    assert squatter.block_table == [parent]
    manager.pages[parent].key, manager.pages[parent].token_ids = int(first.chain[1]), (1, 2)
    manager._cached[int(first.chain[1])] = parent
    # The child still names its parent, but the parent's generation moved on: stop at the parent.
    assert manager.match_prefix(_seq(2, [1, 2, 3, 4, 5])) == [parent]
    assert manager.pages[child].parent == parent


class _RejectPage:
    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.checked: list[int] = []

    def verify_page(self, page, expected_chain) -> bool:
        self.checked.append(page)
        return page != self.bad


def test_cached_pages_are_verified_before_reuse_and_dropped_on_failure() -> None:
    verifier = _RejectPage(bad=-1)
    manager = BlockManager(8, 4, verifier=verifier)
    first = _seq(0, list(range(13)))
    _run_prefill(manager, first)
    verifier.bad = first.block_table[1]
    matched = manager.match_prefix(_seq(1, list(range(13))))
    assert matched == first.block_table[:1]
    assert verifier.checked == first.block_table[:2]
    assert manager.stats.reuse_failures == 1
    assert manager.pages[first.block_table[1]].key is None, "the bad page left the cache"
