"""Turns a scheduled step into tensors, runs the model over the flat batch, checks the KV it read,
and samples (the only engine module that builds tensors).

The model seam is ``CausalLM`` (``runner_types.py``, with ``Sampler`` and ``StepResult``): a
cache-aware forward over a flat batch that calls an ``AttentionBackend`` per layer and returns
logits only for the rows that sample (each chunk's last token), so prefill tokens do not pay for
the vocabulary projection. Sampling goes through ``Sampler``; ``sampling.RequestSampler`` (each
request's own parameters) is the default.
"""

from __future__ import annotations

import time
from collections.abc import Sequence as Sequence_
from dataclasses import dataclass

import numpy as np
import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.attention.paged_batch import (
    AttentionGroup,
    DigestSums,
    PageSample,
    content_digests,
    stored_digests,
)
from ember.models.engine.integrity import IntegrityChecker
from ember.models.engine.integrity_types import GatheredDigest, IntegrityFailure, StepReads
from ember.models.engine.integrity_walk import Readers, Walk, walk_reference
from ember.models.engine.prompt_logprobs import plan_rows, score_rows
from ember.models.engine.runner_types import CausalLM, Sampler, StepResult
from ember.models.engine.sampling import RequestSampler, TokenLogprobs
from ember.models.engine.scheduler import ScheduledSeq
from ember.models.kv.pool import KVPool


@dataclass(slots=True)
class StepWrites:
    """What the integrity checker's flush reads of one step (``_digests``): its token count
    and what its stores reported (``PagedBatch.digest_words`` and ``digest_sums``)."""

    tokens: int
    digest_words: list[torch.Tensor] | None
    digest_sums: DigestSums | None = None


class ModelRunner:
    def __init__(
        self,
        model: CausalLM,
        pool: KVPool,
        *,
        checker: IntegrityChecker | None = None,
        sampler: Sampler | None = None,
    ) -> None:
        self.model = model
        self.pool = pool
        self.checker = checker
        self.sampler = sampler or RequestSampler()
        self.device = pool.device
        self.workspace = Workspace(device=self.device)
        self.num_steps = 0
        self._ptrs: list[tuple[int, int, int]] | None = None
        self._readers = Readers()  # the checker's view of the last decode step's sequences
        # Where the store kernel sums the pending steps' content digests (``_take_sums``).
        self._sums = np.empty(0, dtype=np.int64)
        self._sums_address = 0
        self._sums_used = 0
        if checker is not None:
            checker.digester = self._digests
            checker.slot_joiner = self._join_slots

    def run(
        self,
        scheduled: list[ScheduledSeq],
        new_pages: list[int],
        *,
        prompt_logprobs: bool = False,
    ) -> StepResult:
        """One forward over ``scheduled`` (single-token entries first), then checks and samples.

        ``prompt_logprobs``: some running request wants prompt logprobs, so the rows that
        predict them are planned (``prompt_logprobs.plan_rows``) and projected too; False
        keeps the step exactly as it is for requests that do not ask."""
        self.pool.zero_pages(new_pages)
        page_size = self.pool.page_size
        layout = BatchLayout(
            tuple(s.num_new_tokens for s in scheduled), tuple(s.context_len for s in scheduled)
        )
        checker = self.checker
        token_list: list[int] = []
        position_list: list[int] = []
        for s in scheduled:
            if s.num_new_tokens == 1:
                token_list.append(s.seq.token_ids[s.context_len])
                position_list.append(s.context_len)
            else:
                end = s.context_len + s.num_new_tokens
                token_list.extend(s.seq.token_ids[s.context_len : end])
                position_list.extend(range(s.context_len, end))
        batch = PagedBatch.build(
            layout,
            [s.seq.block_table for s in scheduled],
            page_size,
            self.pool.padding_page,
            self.device,
        )
        if checker is not None:
            started = time.thread_time()
            reads = self._prepare(checker, batch, scheduled, position_list)
            checker.stats.cpu_seconds += time.thread_time() - started
        backend = PagedAttentionBackend(self.pool, batch, self.workspace)
        sample_rows: list[int] = []
        row = 0
        for s in scheduled:
            row += s.num_new_tokens
            if s.needs_sample:
                sample_rows.append(row - 1)
        plan = plan_rows(scheduled) if prompt_logprobs else None
        with torch.inference_mode():
            input_ids = torch.tensor(token_list, dtype=torch.int64)
            indices = None
            if plan is not None:  # the sampling rows first, then the prompt-logprob rows
                indices = torch.tensor(sample_rows + plan.rows, dtype=torch.int64)
            elif len(sample_rows) != len(token_list):
                indices = torch.tensor(sample_rows, dtype=torch.int64)
            if self.device.type != "cpu":
                input_ids = input_ids.to(self.device, non_blocking=True)
                indices = None if indices is None else indices.to(self.device, non_blocking=True)
            logits = self.model.forward(input_ids, backend, indices)
            scores = None
            if plan is not None:
                scores = score_rows(logits[len(sample_rows) :], plan, len(scheduled))
                logits = logits[: len(sample_rows)]
            if not sample_rows:
                logits = None
            elif self.device.type != "cpu":
                # Samplers run on the host: per-request seeded generators, penalties and grammar
                # masks stay where they are tested, and a seed draws the same tokens as on CPU.
                logits = logits.cpu()
        failures: list[IntegrityFailure] = []
        if checker is not None:
            started = time.thread_time()
            failures = self._verify(checker, batch, scheduled, reads, position_list)
            checker.stats.cpu_seconds += time.thread_time() - started
        tokens: list[int | None] = [None] * len(scheduled)
        logprobs: list[TokenLogprobs | None] | None = None
        sample_failures: list[tuple[int, Exception]] = []
        failed = {f.seq_index for f in failures}
        if scores is not None:
            for index in failed:  # computed from KV that failed its check
                scores[index] = None
        if logits is not None:
            entries = [i for i, s in enumerate(scheduled) if s.needs_sample]  # logits row order
            keep = [row for row, i in enumerate(entries) if i not in failed]
            if keep:
                if len(keep) != len(entries):
                    logits = logits[torch.tensor(keep, dtype=torch.int64)]
                seqs = [scheduled[entries[row]].seq for row in keep]
                with torch.inference_mode():
                    picked = self.sampler.sample(logits, seqs)
                for row, token in zip(keep, picked.tokens, strict=True):
                    tokens[entries[row]] = token
                for row, error in picked.failed.items():
                    tokens[entries[keep[row]]] = None
                    sample_failures.append((entries[keep[row]], error))
                if picked.logprobs is not None:
                    logprobs = [None] * len(scheduled)
                    for row, value in zip(keep, picked.logprobs, strict=True):
                        logprobs[entries[row]] = value
        self.num_steps += 1
        return StepResult(tokens, failures, logprobs, scores, sample_failures)

    def _prepare(
        self,
        checker: IntegrityChecker,
        batch: PagedBatch,
        scheduled: list[ScheduledSeq],
        positions: list[int],
    ) -> list[StepReads] | None:
        """Before the forward: stamp who writes each new slot, register the content stamps
        (digested later from what the stores write), check ownership, and ask the attention to
        digest the content sample from its gathers. ``None``: nothing to check this step.

        Done here, right after the token loop, because the sequences and the sidecar are still
        in cache (after the forward every first touch misses: the same walk cost twice as
        much there). The ownership check needs nothing from the forward: pages change hands only
        through ``zero_pages`` and the page-start chain stamps, both done by now. A decode step
        leaves its other chain stamps to the flush (``integrity_walk``).
        """
        sidecar = checker.sidecar
        epoch, page_size = sidecar.epoch + 1, self.pool.page_size
        batch.digest_words = []  # the stores fill it during the forward (or digest_sums)
        # What the flush reads of this step: not the batch, whose attention groups (masks,
        # page tables) the engine frees when the step ends (kept until a flush, 16 steps'
        # batches took ~200 us to free there: glm4-tiny, batch 64).
        written = StepWrites(len(positions), batch.digest_words)  # the list the stores fill
        if len(positions) == len(scheduled):  # one token each: most steps
            walk = self._readers.walk(scheduled, positions, epoch, page_size)
            first_slots: Sequence_[int] = walk.first_slots or []
            # Page starts now, the other chains and the slots' array at the next flush.
            sidecar.stamp_starts(first_slots, walk.first_chains or [])
            slots = batch.slot_mapping  # kept alive by the pending entry, as its address
            checker.defer_content(slots, positions, written, walk.readers, slots.data_ptr())
        else:
            self._readers.settle()
            walk = walk_reference(scheduled, epoch, page_size)
            slots = batch.slot_mapping.numpy()
            first_slots = slots[walk.firsts] if walk.firsts else slots[:0]
            sidecar.stamp_writers(slots, walk.writer, first_slots)
            checker.defer_content(slots, positions, written)
        if self.workspace.store_kernel is not None:  # after defer_content: it may flush
            batch.digest_sums = written.digest_sums = self._take_sums(len(positions))
        stalest = min(walk.epochs, default=0)
        ownership = checker.ownership_changed(stalest)
        plans = [checker.content_columns(g.num_pages, self.num_steps) for g in batch.groups]
        if checker.mode == "sampled" and not ownership and plans.count(None) == len(plans):
            return None  # the common decode step: no page changed hands, no content sample
        if (
            ownership
            and walk.decode
            and stalest == sidecar.epoch
            and checker.only_own_restamps(
                batch.groups[0].pages.numpy(), first_slots, batch.groups[0].pages.data_ptr()
            )
        ):
            ownership = False  # every restamped page is read only by its new first writer
            if plans.count(None) == len(plans):
                return None
        if walk.chains is None:
            walk.chains = [s.seq.chain_buffer for s in scheduled]
        addresses = [s.seq.chain_address for s in scheduled]
        capacities = [s.seq.chain_capacity for s in scheduled]
        tables = [g.pages.numpy().reshape(g.num_seqs, g.num_pages) for g in batch.groups]
        reads = [
            self._group_reads(group, table, batch, walk, addresses, capacities)
            for group, table in zip(batch.groups, tables, strict=True)
        ]
        if ownership:
            checker.check_ownership(reads)
        else:
            for read in reads:
                read.owner_checked = True
        for group, plan in zip(batch.groups, plans, strict=True):
            if plan is not None:
                first, step = plan
                width = len(range(first, group.num_pages, step))
                sums = torch.zeros(group.num_seqs, width, dtype=torch.int64)
                group.sample = PageSample(first, step, sums)
        return reads

    def _verify(
        self,
        checker: IntegrityChecker,
        batch: PagedBatch,
        scheduled: list[ScheduledSeq],
        reads: list[StepReads] | None,
        positions: list[int],
    ) -> list[IntegrityFailure]:
        """Check what this step read (before anything is sampled); the content stamps of what
        it wrote wait for a flush, unless its rows were not whole words."""
        sidecar = checker.sidecar
        if batch.digest_words is None:  # a store's rows were not whole words: read memory now
            checker.stamp_now(batch.slot_mapping.numpy(), positions)
        if batch.digest_sums is not None:  # summed in the stores, during the forward
            checker.stats.cpu_seconds += batch.digest_sums.seconds
        checker.flush_if_full(chunk=len(positions) != len(scheduled))
        failures: list[IntegrityFailure] = []
        if reads is not None:
            for group, read in zip(batch.groups, reads, strict=True):
                if group.sample is not None:
                    checker.stats.cpu_seconds += group.sample.cpu_seconds  # in the forward
                    read.gathered = GatheredDigest(
                        first=group.sample.first,
                        step=group.sample.step,
                        digest=group.sample.sums.numpy().view(np.uint64),
                        missing=[
                            (cache, layer)
                            for cache, layer, ptr in self._layer_ptrs()
                            if ptr not in group.sample.covered
                        ],
                    )
            failures = checker.check_step(reads, self.num_steps)
        # Everything stamped up to now has been checked by the sequences that passed (the walk
        # already moved every scheduled sequence's epoch to the new one).
        sidecar.advance()
        if failures:
            self._readers.settle()
        for failure in failures:
            scheduled[failure.seq_index].seq.integrity_epoch = -1  # re-check everything
        return failures

    def _digests(self, written: list[object]) -> np.ndarray:
        """The checker's digester: ``(sum T,)`` uint64 content digests of the tokens each
        pending step (its ``StepWrites``) wrote, in order: summed by the store kernel as it
        stored, or from the tensors the torch path's stores kept (``stored_digests``)."""
        batches = [batch for batch in written if isinstance(batch, StepWrites)]
        if len(batches) != len(written):
            raise TypeError("a pending content stamp holds no StepWrites")
        words = [batch.digest_words for batch in batches]
        if any(w is None for w in words):
            raise ValueError("a pending step's rows were not whole words (stamp_now's case)")
        sums = [batch.digest_sums for batch in batches]
        if all(s is None for s in sums):  # the torch path: all steps stacked together
            steps = [w for w in words if w is not None]
            return stored_digests(steps, scratch=self.workspace.take).numpy().view(np.uint64)
        if not any(words) and all(s is not None and s.stores for s in sums):
            # Every store summed as it stored (the common case): the steps' runs of the
            # runner's buffer, one slice when they follow each other there.
            runs = [s for s in sums if s is not None]
            first, last = runs[0], runs[-1]
            if all(
                b.buffer is first.buffer and b.offset == a.offset + a.tokens
                for a, b in zip(runs, runs[1:], strict=False)
            ):
                joined = first.buffer[first.offset : last.offset + last.tokens]
            else:
                joined = np.concatenate([s.values() for s in runs])
            self._sums_used = 0  # a flush takes every pending step: the buffer is free again
            return joined.view(np.uint64)
        self._sums_used = 0
        parts = [  # mixed: step by step
            content_digests(b.digest_words, b.digest_sums, b.tokens) for b in batches
        ]
        return torch.cat([p for p in parts if p is not None]).numpy().view(np.uint64)

    def _take_sums(self, tokens: int) -> DigestSums:
        """Room in the runner's sums buffer for one step's content digests, after the pending
        steps' (so that a flush reads one slice); a full buffer is replaced, the pending steps
        keeping theirs."""
        used = self._sums_used
        if used + tokens > len(self._sums):
            self._sums = np.empty(max(2 * (used + tokens), 1 << 14), dtype=np.int64)
            self._sums_address = self._sums.ctypes.data
            used = 0
        self._sums_used = used + tokens
        return DigestSums(self._sums, used, tokens, self._sums_address + 8 * used)

    @staticmethod
    def _join_slots(slots: list[object]) -> np.ndarray:
        """The checker's slot joiner: pending steps' slots (decode steps' slot-mapping tensors,
        other steps' arrays) as one int64 array, the tensors joined by one ``torch.cat``."""
        if all(isinstance(s, torch.Tensor) for s in slots):
            return torch.cat(slots).numpy()  # type: ignore[arg-type]
        return np.concatenate([np.asarray(s, dtype=np.int64) for s in slots])

    def _layer_ptrs(self) -> list[tuple[int, int, int]]:
        """``(cache, layer, data_ptr)`` of every layer of every pool cache (sidecar order)."""
        if self._ptrs is None:
            self._ptrs = [
                (index, layer, cache[layer].data_ptr())
                for index, cache in enumerate(self.pool.caches)
                for layer in range(cache.shape[0])
            ]
        return self._ptrs

    @staticmethod
    def _group_reads(
        group: AttentionGroup,
        pages: np.ndarray,
        batch: PagedBatch,
        walk: Walk,
        addresses: list[int],
        capacities: list[int],
    ) -> StepReads:
        """What one attention group's sequences read (``pages``, its page table as an array)
        and the chains they expect."""
        members = group.members
        layout = batch.layout
        ctx, query = layout.context_lens, layout.query_lens
        whole = len(batch.groups) == 1  # members are every sequence, in order
        assert walk.chains is not None
        return StepReads(
            pages=pages,
            seq_lens=[ctx[i] + query[i] for i in members],
            chains=walk.chains if whole else [walk.chains[i] for i in members],
            chain_addresses=addresses if whole else [addresses[i] for i in members],
            chain_capacities=capacities if whole else [capacities[i] for i in members],
            seq_index=members,
            checked_epoch=np.array([walk.epochs[i] for i in members], dtype=np.int64),
        )
