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
from ember.models.engine.integrity import IntegrityChecker, IntegrityFailure, StepReads
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
            started = time.process_time()
            checker.stamp_tokens(
                batch.slot_mapping.numpy(),
                self._writer_chains(scheduled),
                np.array(position_list, dtype=np.int32),
            )
            batch.digest_words = []
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
            failures = self._verify(checker, batch, scheduled)
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

    def _verify(
        self, checker: IntegrityChecker, batch: PagedBatch, scheduled: list[ScheduledSeq]
    ) -> list[IntegrityFailure]:
        """Stamp what this step wrote, then check what it read (before anything is sampled)."""
        slots = batch.slot_mapping.numpy()
        digests = batch.content_digests()  # from the words the backend stored, per layer
        if digests is not None:
            checker.sidecar.digest[slots] = digests.numpy().view(np.uint64)
        else:
            checker.stamp_content(slots)
        failures = checker.check_step(self._reads(batch, scheduled), self.num_steps)
        # Everything stamped up to now has been checked by the sequences that passed.
        failed = {f.seq_index for f in failures}
        sidecar = checker.sidecar
        sidecar.epoch += 1
        for index, entry in enumerate(scheduled):
            if index not in failed:
                entry.seq.integrity_epoch = sidecar.epoch
        return failures

    @staticmethod
    def _writer_chains(scheduled: list[ScheduledSeq]) -> np.ndarray:
        """The chain of every new token, in batch order: what its slot's stamp must say."""
        if all(s.num_new_tokens == 1 for s in scheduled):  # decode: one lookup per sequence
            return np.array([s.seq.chain_buffer[s.context_len] for s in scheduled], dtype=np.uint64)
        parts = [
            s.seq.chain_buffer[s.context_len : s.context_len + s.num_new_tokens] for s in scheduled
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)

    def _reads(self, batch: PagedBatch, scheduled: list[ScheduledSeq]) -> list[StepReads]:
        """Per attention group: the pages its sequences read and the chains they expect."""
        reads = []
        for group in batch.groups:
            seq_lens, chains, epochs = [], [], []
            for i in group.members:  # one pass: this runs every step for every sequence
                entry = scheduled[i]
                seq_lens.append(entry.context_len + entry.num_new_tokens)
                chains.append(entry.seq.chain_buffer)
                epochs.append(entry.seq.integrity_epoch)
            reads.append(
                StepReads(
                    pages=group.pages.numpy().reshape(group.num_seqs, group.num_pages),
                    seq_lens=seq_lens,
                    chains=chains,
                    seq_index=group.members,
                    checked_epoch=np.array(epochs, dtype=np.int64),
                )
            )
        return reads
