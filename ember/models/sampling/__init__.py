"""Sampling: request parameters, the batched sampler (and its reference), and stop handling.

Engine use, per request and per step::

    params = SamplingParams.from_request(body, defaults=model_generation_defaults)
    state = SamplingState.create(params, vocab_size, prompt_ids, device=logits_device)
    stop = StopChecker(params, decode, eos_token_ids, context_ids=prompt_ids)
    ...
    out = Sampler()(logits, [state, ...])          # logits (B, V); appends each token to its state
    delta = stop.push(int(out.token_ids[row]))      # text to stream; delta.finished / finish_reason
"""

from __future__ import annotations

from ember.models.sampling.params import SamplingParams
from ember.models.sampling.reference import RowSample, sample_row_reference
from ember.models.sampling.sampler import Sampler, SamplerOutput, process_logits
from ember.models.sampling.state import SamplingState
from ember.models.sampling.stop import IncrementalDecoder, StopChecker, TextDelta

__all__ = [
    "IncrementalDecoder",
    "RowSample",
    "Sampler",
    "SamplerOutput",
    "SamplingParams",
    "SamplingState",
    "StopChecker",
    "TextDelta",
    "process_logits",
    "sample_row_reference",
]
