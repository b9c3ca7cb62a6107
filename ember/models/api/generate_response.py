"""SGLang's ``/generate`` answer: ``text``, ``output_ids`` and ``meta_info`` (finish reason,
token counts, logprob entries), whole or one per stream event."""

from __future__ import annotations

from collections.abc import Sequence

from ember.models.api.responses import Usage


def generate_finish_reason(
    finish_reason: str, *, matched: int | str | None = None, length: int | None = None
) -> dict | None:
    """SGLang's ``meta_info.finish_reason``: ``{"type": "stop", "matched": <id or text>}``,
    ``{"type": "length", "length": N}``, and for a request ended by ``/abort_request`` SGLang's
    ``FINISH_ABORT().to_json()``: ``{"type": "abort", "message": "Aborted", "status_code":
    null, "err_type": null}``; None while running."""
    if finish_reason == "stop":
        return {"type": "stop", "matched": matched}
    if finish_reason == "length":
        return {"type": "length", "length": length}
    if finish_reason == "abort":
        return {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
    raise ValueError(f"unknown finish_reason {finish_reason!r}")


# SGLang's logprob entry: (logprob, token id, token text); the logprob of the first prompt
# token of input_token_logprobs is None.
LogprobEntry = tuple[float | None, int, str | None]


def generate_response(
    *,
    rid: str,
    text: str,
    output_ids: Sequence[int],
    usage: Usage,
    finish_reason: dict | None,
    e2e_latency: float | None = None,
    output_token_logprobs: Sequence[LogprobEntry] | None = None,
    output_top_logprobs: Sequence[Sequence[LogprobEntry]] | None = None,
    input_token_logprobs: Sequence[LogprobEntry] | None = None,
    input_top_logprobs: Sequence[Sequence[LogprobEntry] | None] | None = None,
) -> dict:
    """One SGLang ``/generate`` answer (streaming: one per event, ``text`` cumulative).
    ``output_top_logprobs``: per output token, the ``top_logprobs_num`` most likely;
    ``input_*``: the same for the prompt tokens from ``logprob_start_len`` on (the first
    entry's logprob, and its top list, null)."""
    meta: dict = {
        "id": rid,
        "finish_reason": finish_reason,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
    }
    if e2e_latency is not None:
        meta["e2e_latency"] = e2e_latency
    if output_token_logprobs is not None:
        meta["output_token_logprobs"] = [list(item) for item in output_token_logprobs]
    if output_top_logprobs is not None:
        meta["output_top_logprobs"] = [[list(item) for item in top] for top in output_top_logprobs]
    if input_token_logprobs is not None:
        meta["input_token_logprobs"] = [list(item) for item in input_token_logprobs]
    if input_top_logprobs is not None:
        meta["input_top_logprobs"] = [
            None if top is None else [list(item) for item in top] for top in input_top_logprobs
        ]
    return {"text": text, "output_ids": list(output_ids), "meta_info": meta}
