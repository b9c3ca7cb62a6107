"""Continuous batching: which sequences run in the next step, and with how many tokens (torch-free).

One step is one forward over a flat batch that can mix decodes (one token each) and prefill chunks.
Per step, under a token budget (``max_num_batched_tokens``):

1. every running sequence that is decoding gets its one token (oldest first); when no page is free
   for it, the newest running sequence is preempted (its pages freed, recomputed later);
2. running sequences in the middle of a chunked prefill get their next chunk;
3. waiting sequences are admitted first come, first served while the budget, ``max_num_seqs`` and
   the free pages allow, each reusing validated prefix-cache pages; the last one admitted may get
   a partial chunk (chunked prefill). Admission never preempts.

Admission reserves pages for growth, as SGLang's ``new_token_ratio`` does: a request is admitted
only if the free pages cover its whole prompt and ``ratio`` x its ``max_tokens``, on top of what
every running request will still need at the same ratio. Counting only the prompt's pages (as
this scheduler once did) let a budget meant for 32 whole requests start ~38, and the newest were
then preempted, re-admitted at once (their prompt fitted again) and preempted again: ~70 recomputes
per 64-request run. The ratio starts at ``init_new_token_ratio``, decays each step towards
``min_new_token_ratio`` (most requests stop well before ``max_tokens``), and a preemption raises it
to the share of ``max_tokens`` the still-running requests have already used.

Preemption is by recompute: the sequence keeps its tokens and re-runs them as a prefill (its full
pages usually come straight back from the prefix cache). Aborts free pages at once.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from ember.errors import KVCacheExhausted
from ember.models.engine.block_manager import BlockManager
from ember.models.engine.config import EngineConfig
from ember.models.engine.sequence import FinishReason, Sequence, SequenceStatus

# After a preemption, reserve at least this many more decode steps per running request.
_RETRACT_STEPS = 20


@dataclass(slots=True)
class ScheduledSeq:
    """A sequence in this step's batch: its new tokens start at ``context_len``."""

    seq: Sequence
    num_new_tokens: int
    context_len: int

    @property
    def needs_sample(self) -> bool:
        """The chunk reaches the last token, so its logits give the next token."""
        return self.context_len + self.num_new_tokens == self.seq.num_tokens


@dataclass(slots=True)
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)  # single-token entries first
    num_preempted: int = 0

    @property
    def num_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)


class Scheduler:
    def __init__(self, config: EngineConfig, block_manager: BlockManager) -> None:
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admission order, oldest first
        self.finished: list[Sequence] = []  # finished outside a step (abort, errors); drained
        self.num_preemptions = 0
        self.new_token_ratio = config.init_new_token_ratio
        self._ratio_decay = (
            config.init_new_token_ratio - config.min_new_token_ratio
        ) / config.new_token_ratio_decay_steps
        self._out_of_pages = False  # a preemption for room in this step (not an integrity one)

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def abort(self, seq: Sequence, reason: FinishReason = FinishReason.ABORT) -> None:
        """End a sequence from outside (client gone, stop string): drop it wherever it is and
        free its pages now."""
        if seq.status is SequenceStatus.WAITING:
            self.waiting.remove(seq)
        elif seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        else:
            return
        self._finish(seq, reason)

    def finish(
        self,
        seq: Sequence,
        reason: FinishReason,
        error: Exception | None = None,
        *,
        disowned: frozenset[int] = frozenset(),
    ) -> None:
        """End a running sequence (stop condition, or an error after it ran)."""
        self.running.remove(seq)
        self._finish(seq, reason, error, disowned=disowned)

    def _finish(
        self,
        seq: Sequence,
        reason: FinishReason,
        error: Exception | None = None,
        *,
        disowned: frozenset[int] = frozenset(),
    ) -> None:
        self.block_manager.release(seq, disowned=disowned)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        seq.error = error
        self.finished.append(seq)

    def preempt(self, seq: Sequence, *, disowned: frozenset[int] = frozenset()) -> None:
        """Free a running sequence's pages and queue it to recompute, ahead of new arrivals."""
        self.running.remove(seq)
        self.block_manager.release(seq, disowned=disowned)
        seq.reset_for_recompute()
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    # -- the step -------------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.config.max_num_batched_tokens
        taken: set[int] = set()
        decoding = [s for s in self.running if s.num_uncomputed_tokens == 1]
        prefilling = [s for s in self.running if s.num_uncomputed_tokens > 1]
        for seq in decoding + prefilling:
            if seq.status is not SequenceStatus.RUNNING or budget == 0:
                continue  # preempted earlier in this loop, or out of budget
            num_new = min(seq.num_uncomputed_tokens, budget)
            if not self._make_room(seq, num_new, taken, out):
                continue
            self.block_manager.append(seq, num_new)
            out.scheduled.append(ScheduledSeq(seq, num_new, seq.num_computed_tokens))
            taken.add(seq.seq_id)
            budget -= num_new
        self._admit(budget, out)
        out.scheduled.sort(key=lambda s: s.num_new_tokens != 1)  # stable: single tokens first
        return out

    def _make_room(
        self, seq: Sequence, num_new: int, taken: set[int], out: SchedulerOutput
    ) -> bool:
        """Preempt the newest unscheduled sequences until ``seq`` fits; False if it was itself."""
        while not self.block_manager.can_append(seq, num_new):
            victim = next(
                (s for s in reversed(self.running) if s is not seq and s.seq_id not in taken),
                None,
            )
            self._out_of_pages = True
            if victim is None:
                self.preempt(seq)
                out.num_preempted += 1
                return False
            self.preempt(victim)
            out.num_preempted += 1
        return True

    # -- reservation ----------------------------------------------------------------------------

    def future_pages(self, seq: Sequence, num_held: int | None = None) -> int:
        """Pages ``seq`` will still take beyond the ``num_held`` it has (its block table by
        default): the rest of its prompt and ``new_token_ratio`` x its remaining ``max_tokens``.
        The last sampled token is never cached, hence the ``- 1``."""
        remaining = min(
            seq.stop.max_tokens - seq.num_completion_tokens,
            self.config.max_model_len - seq.num_tokens,
        )
        expected = seq.num_tokens + max(0, math.ceil(remaining * self.new_token_ratio) - 1)
        held = len(seq.block_table) if num_held is None else num_held
        return max(0, self.block_manager.pages_for(expected) - held)

    def _update_ratio(self) -> None:
        """Decay the ratio after a step that found room; after one that did not, raise it to
        what the running requests have shown they need (SGLang's retraction estimate: tokens
        decoded so far plus a few steps' worth, over their ``max_tokens``)."""
        config = self.config
        if not self._out_of_pages:
            self.new_token_ratio = max(
                config.min_new_token_ratio, self.new_token_ratio - self._ratio_decay
            )
            return
        self._out_of_pages = False
        decoded = sum(s.num_completion_tokens for s in self.running)
        allowed = sum(s.stop.max_tokens for s in self.running)
        if allowed:
            estimate = (decoded + _RETRACT_STEPS * len(self.running)) / allowed
            self.new_token_ratio = min(1.0, max(self.new_token_ratio, estimate))

    def _admit(self, budget: int, out: SchedulerOutput) -> None:
        manager = self.block_manager
        self._update_ratio()
        reserved = -1  # pages the running requests will still need; summed only when asked
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            if manager.pages_for(seq.num_tokens) > manager.num_pages:
                self.waiting.popleft()
                capacity = manager.num_pages * manager.page_size
                error = KVCacheExhausted(
                    f"request {seq.request_id!r} needs {seq.num_tokens} tokens of KV cache; "
                    f"the pool holds {capacity}"
                )
                self._finish(seq, FinishReason.ERROR, error)
                continue
            matched = manager.match_prefix(seq)
            num_new = min(seq.num_tokens - len(matched) * manager.page_size, budget)
            if not manager.can_admit(seq, matched, num_new):
                break
            if self.running:  # alone, a request runs whatever it may grow to
                if reserved < 0:
                    reserved = sum(self.future_pages(s) for s in self.running)
                reused_free = sum(1 for p in matched if manager.pages[p].ref_count == 0)
                needed = self.future_pages(seq, len(matched)) + reused_free
                if needed + reserved > manager.num_free_pages:
                    break
            self.waiting.popleft()
            manager.admit(seq, matched, num_new)
            if reserved >= 0:
                reserved += self.future_pages(seq)
            if not seq.is_admitted_before:
                seq.is_admitted_before = True
                seq.num_cached_tokens = seq.num_computed_tokens
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.scheduled.append(ScheduledSeq(seq, num_new, seq.num_computed_tokens))
            budget -= num_new
