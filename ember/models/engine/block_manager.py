"""Hands out KV pages: free list, reference counts and a prefix cache over full pages (torch-free).

Prefix cache. A full page is registered under its key, the sequence's chain hash at the page's
last token. A lookup never trusts the key alone: a hit must also have

- exactly the same ``page_size`` token ids as the request at that page (compared one by one),
- the same ``cache_salt`` (vLLM's request field; ``ember serve`` gives each account its own):
  requests of different salts, or a salted and an unsalted one, never share a page, whatever
  their hashes (which start from the salt too, so they do not even meet), and
- the same parent: the page that preceded it when it was computed, still holding the same content
  (its ``generation`` has not moved since), which the walk has just validated the same way.

By induction the whole prefix is compared token by token, so a hash collision can only cause a
miss, never a wrong hit. When a page's last reference goes, it returns to the free list but keeps
its entry until the page is handed out again (oldest freed first), so a finished or preempted
request's prefix stays reusable for as long as possible.

Integrity. A ``PageVerifier`` (the KV sidecar) checks every page a hit would reuse before it is
reused; a page that fails is dropped from the cache and the match stops there (a miss).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ember.models.engine.sequence import Sequence


class PageVerifier(Protocol):
    """Checks that a cached page still holds what ``expected_chain`` says it should."""

    def verify_page(self, page: int, expected_chain: np.ndarray) -> bool: ...


@dataclass(slots=True)
class Page:
    page_id: int
    ref_count: int = 0
    generation: int = 0  # bumped each time the page is handed out anew
    key: int | None = None  # prefix-cache key while registered
    token_ids: tuple[int, ...] = ()
    parent: int = -1  # the page before this one when it was computed (-1: first page)
    parent_generation: int = -1
    salt: str | None = None  # the cache_salt of the request that computed it


@dataclass(slots=True)
class BlockManagerStats:
    prefix_queries: int = 0  # tokens looked up
    prefix_hits: int = 0  # tokens served from the cache
    reuse_verifications: int = 0  # pages verified before reuse
    reuse_failures: int = 0  # pages that failed that check and were dropped
    newly_allocated: list[int] = field(default_factory=list)  # drained by the runner (zeroing)


class BlockManager:
    def __init__(
        self,
        num_pages: int,
        page_size: int,
        *,
        enable_prefix_cache: bool = True,
        verifier: PageVerifier | None = None,
    ) -> None:
        if num_pages <= 0 or page_size <= 0:
            raise ValueError("num_pages and page_size must be positive")
        self.page_size = page_size
        self.pages = [Page(i) for i in range(num_pages)]
        self._free: dict[int, None] = dict.fromkeys(range(num_pages))  # insertion-ordered set
        self._cached: dict[int, int] = {}  # key -> page id
        self.enable_prefix_cache = enable_prefix_cache
        self.verifier = verifier
        self.stats = BlockManagerStats()

    @property
    def num_pages(self) -> int:
        return len(self.pages)

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    def pages_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.page_size)

    def num_pages_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        """Pages to add so ``seq`` can cache ``num_new_tokens`` more tokens."""
        total = self.pages_for(seq.num_computed_tokens + num_new_tokens)
        return max(0, total - len(seq.block_table))

    # -- prefix cache -------------------------------------------------------------------------

    def match_prefix(self, seq: Sequence) -> list[int]:
        """Validated cached pages for the start of ``seq`` (no references taken).

        At least one token is always left to compute, so the forward yields logits; and no
        page from the first position whose logits the request's prompt logprobs still need
        (a cached page has its KV, not its logits: they are recomputed, as SGLang does).
        """
        if not self.enable_prefix_cache:
            return []
        size = self.page_size
        max_pages = (seq.num_tokens - 1) // size
        wanted = seq.prompt_logprob_position
        if wanted is not None:
            max_pages = min(max_pages, wanted // size)
        chain = seq.chain
        tokens = seq.token_ids
        salt = seq.cache_salt
        matched: list[int] = []
        parent, parent_generation = -1, -1
        for i in range(max_pages):
            page_id = self._cached.get(int(chain[(i + 1) * size - 1]))
            if page_id is None:
                break
            page = self.pages[page_id]
            if (
                page.parent != parent
                or page.parent_generation != parent_generation
                or page.salt != salt
                or page.token_ids != tuple(tokens[i * size : (i + 1) * size])
            ):
                break
            if self.verifier is not None:
                self.stats.reuse_verifications += 1
                if not self.verifier.verify_page(page_id, chain[i * size : (i + 1) * size]):
                    self.stats.reuse_failures += 1
                    self.invalidate(page_id)
                    break
            matched.append(page_id)
            parent, parent_generation = page_id, page.generation
        return matched

    @property
    def num_cached_pages(self) -> int:
        """Pages registered in the prefix cache (held or free)."""
        return len(self._cached)

    def flush(self) -> int:
        """Forget every prefix-cache entry (SGLang's ``/flush_cache``); returns how many.

        The pages keep their places (free, when the engine is idle, which ``LLMEngine``
        checks first): only the keys go, so a later request recomputes its whole prompt.
        """
        dropped = len(self._cached)
        for page_id in list(self._cached.values()):
            self.invalidate(page_id)
        self._cached.clear()
        return dropped

    def invalidate(self, page_id: int) -> None:
        """Drop a page's prefix-cache entry (its content is no longer trusted)."""
        page = self.pages[page_id]
        if page.key is not None and self._cached.get(page.key) == page_id:
            del self._cached[page.key]
        page.key = None
        page.token_ids = ()

    def commit(self, seq: Sequence) -> None:
        """Register ``seq``'s newly completed pages in the prefix cache."""
        size = self.page_size
        num_full = seq.num_computed_tokens // size
        if not self.enable_prefix_cache:
            seq.num_committed_pages = num_full
            return
        chain = seq.chain
        for i in range(seq.num_committed_pages, num_full):
            page = self.pages[seq.block_table[i]]
            key = int(chain[(i + 1) * size - 1])
            if page.key != key:
                self.invalidate(page.page_id)
                page.key = key
                page.token_ids = tuple(seq.token_ids[i * size : (i + 1) * size])
                page.salt = seq.cache_salt
                if i:
                    parent = self.pages[seq.block_table[i - 1]]
                    page.parent, page.parent_generation = parent.page_id, parent.generation
                else:
                    page.parent, page.parent_generation = -1, -1
                self._cached[key] = page.page_id
        seq.num_committed_pages = max(seq.num_committed_pages, num_full)

    # -- allocation -----------------------------------------------------------------------------

    def can_admit(self, seq: Sequence, matched: list[int], num_new_tokens: int) -> bool:
        """Whether ``seq`` fits with ``matched`` reused and ``num_new_tokens`` more to compute."""
        reused_free = sum(1 for p in matched if self.pages[p].ref_count == 0)
        needed = self.pages_for(len(matched) * self.page_size + num_new_tokens) - len(matched)
        return needed + reused_free <= len(self._free)

    def admit(self, seq: Sequence, matched: list[int], num_new_tokens: int) -> None:
        """Give a waiting ``seq`` its reused pages and room for ``num_new_tokens``."""
        assert not seq.block_table, "admit() needs a sequence without pages"
        for page_id in matched:
            page = self.pages[page_id]
            if page.ref_count == 0:
                del self._free[page_id]
            page.ref_count += 1
        seq.block_table = list(matched)
        seq.num_computed_tokens = len(matched) * self.page_size
        seq.num_committed_pages = len(matched)
        self.stats.prefix_queries += seq.num_tokens
        self.stats.prefix_hits += seq.num_computed_tokens
        self.append(seq, num_new_tokens)

    def can_append(self, seq: Sequence, num_new_tokens: int) -> bool:
        return self.num_pages_needed(seq, num_new_tokens) <= len(self._free)

    def append(self, seq: Sequence, num_new_tokens: int) -> None:
        """Extend ``seq``'s block table to hold ``num_new_tokens`` more tokens."""
        needed = self.num_pages_needed(seq, num_new_tokens)
        if needed > len(self._free):
            raise RuntimeError(f"append() without room: need {needed}, free {len(self._free)}")
        for _ in range(needed):
            seq.block_table.append(self._allocate())

    def _allocate(self) -> int:
        page_id = next(iter(self._free))
        del self._free[page_id]
        page = self.pages[page_id]
        assert page.ref_count == 0, f"free page {page_id} has references"
        self.invalidate(page_id)
        page.ref_count = 1
        page.generation += 1
        self.stats.newly_allocated.append(page_id)
        return page_id

    def release(self, seq: Sequence, *, disowned: frozenset[int] = frozenset()) -> None:
        """Drop ``seq``'s references; pages nobody holds go back to the free list.

        ``disowned`` pages were found written by another sequence (the sidecar's chain did not
        match): ``seq``'s claim on them was already lost, so they are forgotten, not freed.
        """
        for page_id in reversed(seq.block_table):
            if page_id in disowned:
                continue
            page = self.pages[page_id]
            assert page.ref_count > 0, f"page {page_id} released more often than held"
            page.ref_count -= 1
            if page.ref_count == 0:
                self._free[page_id] = None
        seq.block_table = []
