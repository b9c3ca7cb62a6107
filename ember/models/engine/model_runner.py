"""Turns a scheduled step into tensors, runs the model over the flat batch, checks the KV it read,
and samples (the only engine module that builds tensors).

The model seam is ``CausalLM``: a cache-aware forward over a flat batch that calls an
``AttentionBackend`` per layer and returns logits only for the rows that sample (each chunk's last
token), so prefill tokens do not pay for the vocabulary projection. Sampling goes through
``Sampler``; ``sampling.RequestSampler`` (each request's own parameters) is the default.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ember.models.attention.backend import AttentionBackend, BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.attention.paged_batch import AttentionGroup, PageSample
from ember.models.engine.integrity import (
    GatheredDigest,
    IntegrityChecker,
    IntegrityFailure,
    StepReads,
)
from ember.models.engine.sampling import RequestSampler, SampleResult, TokenLogprobs
from ember.models.engine.scheduler import ScheduledSeq
from ember.models.engine.sequence import Sequence
from ember.models.kv.pool import KVPool


class CausalLM(Protocol):
    """What the engine needs from an architecture (``ember.models.arch.base.CausalLM``)."""

    def forward(
        self,
        input_ids: torch.Tensor,
        backend: AttentionBackend,
        logits_indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``(T,)`` new tokens laid out as ``backend.layout`` -> logits of ``logits_indices``."""
        ...


class Sampler(Protocol):
    def sample(self, logits: torch.Tensor, seqs: list[Sequence]) -> SampleResult:
        """One next token per row of ``logits`` (row ``i`` belongs to ``seqs[i]``).

        Called only for rows whose KV passed this step's integrity checks, so a sampler that
        keeps per-request state (penalties, a seeded generator) never sees a discarded step.
        """
        ...


@dataclass(slots=True)
class StepResult:
    """Next token per scheduled entry (``None``: mid-prefill or failed) and integrity verdicts."""

    tokens: list[int | None]
    failures: list[IntegrityFailure] = field(default_factory=list)
    logprobs: list[TokenLogprobs | None] | None = None  # per scheduled entry, when asked


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
        self.workspace = Workspace()
        self.num_steps = 0
        self._ptrs: list[tuple[int, int, int]] | None = None

    def run(self, scheduled: list[ScheduledSeq], new_pages: list[int]) -> StepResult:
        """One forward over ``scheduled`` (single-token entries first), then checks and samples."""
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
            layout, [s.seq.block_table for s in scheduled], page_size, self.pool.padding_page
        )
        if checker is not None:
            batch.digest_words = []  # the stores collect what they write, to stamp after
            started = time.process_time()
            reads = self._prepare(checker, batch, scheduled, position_list)
            checker.stats.cpu_seconds += time.process_time() - started
        backend = PagedAttentionBackend(self.pool, batch, self.workspace)
        sample_rows: list[int] = []
        row = 0
        for s in scheduled:
            row += s.num_new_tokens
            if s.needs_sample:
                sample_rows.append(row - 1)
        with torch.inference_mode():
            input_ids = torch.tensor(token_list, dtype=torch.int64)
            indices = None
            if len(sample_rows) != len(token_list):
                indices = torch.tensor(sample_rows, dtype=torch.int64)
            logits = self.model.forward(input_ids, backend, indices)
            if not sample_rows:
                logits = None
        failures: list[IntegrityFailure] = []
        if checker is not None:
            started = time.process_time()
            failures = self._verify(checker, batch, scheduled, reads)
            checker.stats.cpu_seconds += time.process_time() - started
        tokens: list[int | None] = [None] * len(scheduled)
        logprobs: list[TokenLogprobs | None] | None = None
        if logits is not None:
            failed = {f.seq_index for f in failures}
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
                if picked.logprobs is not None:
                    logprobs = [None] * len(scheduled)
                    for row, value in zip(keep, picked.logprobs, strict=True):
                        logprobs[entries[row]] = value
        self.num_steps += 1
        return StepResult(tokens, failures, logprobs)

    def _prepare(
        self,
        checker: IntegrityChecker,
        batch: PagedBatch,
        scheduled: list[ScheduledSeq],
        positions: list[int],
    ) -> list[StepReads]:
        """Before the forward: stamp who writes each new slot, collect what each group reads,
        check ownership, and ask the attention to digest the content sample from its gathers.

        Done here, right after the token loop, because the sequences and the sidecar are still
        in cache (after the forward each access misses: the walk cost twice as much there). The
        ownership check needs nothing from the forward: pages change hands only through
        ``zero_pages`` and ``stamp_tokens``, both done by now.
        """
        chains, epochs, writer = self._walk(scheduled)
        checker.stamp_tokens(
            batch.slot_mapping.numpy(), writer, np.array(positions, dtype=np.int32)
        )
        reads = [self._group_reads(group, batch.layout, chains, epochs) for group in batch.groups]
        checker.check_ownership(reads)
        for group, read in zip(batch.groups, reads, strict=True):
            entries = checker.content_sample(read.pages, self.num_steps)
            if entries is not None and len(entries):
                group.sample = PageSample(
                    torch.from_numpy(entries), torch.zeros(len(entries), dtype=torch.int64)
                )
        return reads

    def _verify(
        self,
        checker: IntegrityChecker,
        batch: PagedBatch,
        scheduled: list[ScheduledSeq],
        reads: list[StepReads],
    ) -> list[IntegrityFailure]:
        """Stamp what this step wrote, then check what it read (before anything is sampled)."""
        sidecar = checker.sidecar
        slots = batch.slot_mapping.numpy()
        digests = batch.content_digests()  # from the words the backend stored, per layer
        if digests is not None:
            sidecar.digest[slots] = digests.numpy().view(np.uint64)
        else:
            checker.stamp_content(slots)
        for group, read in zip(batch.groups, reads, strict=True):
            if group.sample is not None:
                checker.stats.cpu_seconds += group.sample.cpu_seconds  # summed in the forward
                read.gathered = GatheredDigest(
                    entries=group.sample.entries.numpy(),
                    digest=group.sample.sums.numpy().view(np.uint64),
                    missing=[
                        (cache, layer)
                        for cache, layer, ptr in self._layer_ptrs()
                        if ptr not in group.sample.covered
                    ],
                )
        failures = checker.check_step(reads, self.num_steps)
        # Everything stamped up to now has been checked by the sequences that passed.
        sidecar.epoch += 1
        epoch = sidecar.epoch
        if failures:
            failed = {f.seq_index for f in failures}
            for index, entry in enumerate(scheduled):
                if index not in failed:
                    entry.seq.integrity_epoch = epoch
        else:
            for entry in scheduled:
                entry.seq.integrity_epoch = epoch
        return failures

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
    def _walk(
        scheduled: list[ScheduledSeq],
    ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """One pass over the step's sequences: each one's chain buffer, the epoch of its last
        passed check, and the chain of every new token in batch order (its slot's stamp)."""
        chains = [entry.seq.chain_buffer for entry in scheduled]
        epochs = np.fromiter(
            (entry.seq.integrity_epoch for entry in scheduled), np.int64, len(scheduled)
        )
        if all(entry.num_new_tokens == 1 for entry in scheduled):  # decode: one per sequence
            writer = np.fromiter(
                (c[e.context_len] for c, e in zip(chains, scheduled, strict=True)),
                np.uint64,
                len(scheduled),
            )
        elif scheduled:
            writer = np.concatenate(
                [
                    c[e.context_len : e.context_len + e.num_new_tokens]
                    for c, e in zip(chains, scheduled, strict=True)
                ]
            )
        else:
            writer = np.zeros(0, dtype=np.uint64)
        return chains, epochs, writer

    @staticmethod
    def _group_reads(
        group: AttentionGroup,
        layout: BatchLayout,
        chains: list[np.ndarray],
        epochs: np.ndarray,
    ) -> StepReads:
        """What one attention group's sequences read and the chains they expect."""
        members = group.members
        ctx, query = layout.context_lens, layout.query_lens
        return StepReads(
            pages=group.pages.numpy().reshape(group.num_seqs, group.num_pages),
            seq_lens=[ctx[i] + query[i] for i in members],
            chains=[chains[i] for i in members],
            seq_index=members,
            checked_epoch=epochs[members],
        )
