"""One request's tokens and its place in the KV cache (torch-free).

A sequence's KV lives in ``block_table`` (page ids, in order); ``num_computed_tokens`` of its
tokens have cache entries. During decode ``len(token_ids) == num_computed_tokens + 1``: the last
sampled token's entry is written by the next forward. The sequence also keeps its token chain
(``chain[i]`` hashes tokens ``0..i`` with their positions, from a seed that is the request's
``cache_salt``'s): the prefix-cache key of a full page and the integrity sidecar's expectation for
every slot it reads.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ember.models.engine.logprob_types import PromptLogprobSpec, PromptTokenLogprob
from ember.models.kv.integrity import chain_seed, chain_step


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class FinishReason(enum.Enum):
    STOP = "stop"  # a stop token (EOS or one the request named)
    LENGTH = "length"  # max_tokens or the model's context length
    ABORT = "abort"  # the client went away
    ERROR = "error"  # the engine could not serve it (see ``Sequence.error``)


@dataclass(frozen=True, slots=True)
class StopCriteria:
    """When a sequence ends, as far as the engine decides on token ids."""

    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()
    ignore_eos: bool = False


class Sequence:
    """A request inside the engine."""

    __slots__ = (
        "seq_id",
        "request_id",
        "token_ids",
        "num_prompt_tokens",
        "stop",
        "sampling",
        "status",
        "block_table",
        "num_computed_tokens",
        "num_committed_pages",
        "num_cached_tokens",
        "is_admitted_before",
        "num_preemptions",
        "num_integrity_failures",
        "integrity_epoch",
        "finish_reason",
        "error",
        "chain_buffer",
        "chain_address",
        "chain_capacity",
        "prompt_logprob_spec",
        "prompt_logprobs",
        "prompt_logprobs_sent",
        "cache_salt",
        "chain_seed",
    )

    def __init__(
        self,
        seq_id: int,
        request_id: str,
        prompt_token_ids: list[int],
        stop: StopCriteria,
        sampling: object = None,
        prompt_logprob_spec: PromptLogprobSpec | None = None,
        *,
        cache_salt: str | None = None,
    ) -> None:
        self.seq_id = seq_id
        self.request_id = request_id
        self.token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.stop = stop
        self.sampling = sampling  # opaque to the engine core; read by the sampler
        self.status = SequenceStatus.WAITING
        self.block_table: list[int] = []
        self.num_computed_tokens = 0
        self.num_committed_pages = 0  # full pages registered in the prefix cache
        self.num_cached_tokens = 0  # prompt tokens served from the prefix cache (first admission)
        self.is_admitted_before = False
        self.num_preemptions = 0
        self.num_integrity_failures = 0
        self.integrity_epoch = -1  # sidecar epoch of the last check this sequence passed
        self.finish_reason: FinishReason | None = None
        self.error: Exception | None = None
        self.prompt_logprob_spec = prompt_logprob_spec
        # Collected in order from token ``spec.start`` on; kept across recomputes, so only
        # the positions after them are computed again.
        self.prompt_logprobs: list[PromptTokenLogprob] = []
        self.prompt_logprobs_sent = False  # handed out with the request's first output
        # The chain's backing array: entries past ``num_tokens`` are garbage. A plain attribute
        # (no property) because the integrity walk reads it for every sequence every step.
        self.chain_buffer = np.empty(max(16, 2 * len(prompt_token_ids)), dtype=np.uint64)
        # Its address and length, for the integrity checker's native loops (``ndarray.ctypes``
        # costs ~7 us a call in the engine, ``len`` ~0.3: 64 of them a flush cost more than the
        # loop); kept with every reallocation.
        self.chain_address: int = self.chain_buffer.ctypes.data
        self.chain_capacity = len(self.chain_buffer)
        # Pages are shared only between requests of the same salt (vLLM's cache_salt): the
        # block manager compares it, and the chain starts from it.
        self.cache_salt = cache_salt
        self.chain_seed = chain_seed(cache_salt)
        prev = self.chain_seed
        for position, token in enumerate(prompt_token_ids):
            prev = chain_step(prev, token, position)
            self.chain_buffer[position] = prev

    def __repr__(self) -> str:
        return (
            f"Sequence({self.request_id!r}, tokens={len(self.token_ids)}, "
            f"computed={self.num_computed_tokens}, pages={self.block_table}, {self.status.value})"
        )

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_completion_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def prompt_logprob_position(self) -> int | None:
        """The first position whose logits this request still needs for its prompt logprobs
        (the row at position ``p`` scores token ``p + 1``); ``None`` when it needs none."""
        spec = self.prompt_logprob_spec
        if spec is None:
            return None
        token = spec.start + len(self.prompt_logprobs)
        if token >= self.num_prompt_tokens:
            return None
        return token - 1

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    @property
    def chain(self) -> np.ndarray:
        """``chain[i]`` = hash of tokens ``0..i`` with their positions (uint64, a view)."""
        return self.chain_buffer[: len(self.token_ids)]

    def append_token(self, token: int) -> None:
        position = len(self.token_ids)
        if position == len(self.chain_buffer):
            grown = np.empty(2 * position, dtype=np.uint64)
            grown[:position] = self.chain_buffer
            self.chain_buffer = grown
            self.chain_address = grown.ctypes.data
            self.chain_capacity = len(grown)
        prev = int(self.chain_buffer[position - 1]) if position else self.chain_seed
        self.chain_buffer[position] = chain_step(prev, token, position)
        self.token_ids.append(token)

    def reset_for_recompute(self) -> None:
        """Forget the cache (after preemption or an integrity failure); tokens stay."""
        self.block_table = []
        self.num_computed_tokens = 0
        self.num_committed_pages = 0
        self.integrity_epoch = -1
        self.status = SequenceStatus.WAITING
