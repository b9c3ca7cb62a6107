"""The engine's prompt logprobs in the OpenAI routes' formats (SGLang's ``/generate`` builds
its own ``input_token_logprobs`` in ``sglang_routes``).

- ``echoed_tokens``: the prompt's entries of the legacy completions ``logprobs`` object when
  ``echo`` and ``logprobs`` are set (OpenAI, vLLM): the first token null, then each token's
  logprob, and as alternatives the token itself and the ``logprobs`` most likely (OpenAI's
  "up to logprobs+1 elements", vLLM's dict).
- ``vllm_prompt_logprobs``: vLLM's ``choices[].prompt_logprobs``: ``[null, {"<token id>":
  {"logprob", "rank", "decoded_token"}, ...}, ...]``, the prompt token first, then the
  alternatives by rank.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.models.api.responses import TokenLogprob
from ember.models.engine.logprob_types import PromptTokenLogprob, clamp_logprob
from ember.models.server.inputs import logprob_token
from ember.models.server.loading import ServedModel


def echoed_tokens(
    served: ServedModel,
    prompt_ids: Sequence[int],
    scored: Sequence[PromptTokenLogprob],
    top: int,
) -> list[TokenLogprob]:
    """The prompt's tokens for the completions ``logprobs`` object: ``scored`` covers
    ``prompt_ids[1:]`` (the engine scores from the second token when echoing)."""
    if len(scored) != len(prompt_ids) - 1:
        raise ValueError(f"{len(scored)} prompt logprobs for a {len(prompt_ids)}-token prompt")
    text, raw = logprob_token(served, prompt_ids[0])
    out = [TokenLogprob(text, None, raw=raw)]
    for entry in scored:
        text, raw = logprob_token(served, entry.token_id)
        value = clamp_logprob(entry.logprob)
        alternatives = [TokenLogprob(text, value, raw=raw)]
        for token_id, logprob in entry.top[:top]:
            if token_id != entry.token_id:
                alt_text, alt_raw = logprob_token(served, token_id)
                alternatives.append(TokenLogprob(alt_text, clamp_logprob(logprob), raw=alt_raw))
        out.append(TokenLogprob(text, value, tuple(alternatives), raw))
    return out


def vllm_prompt_logprobs(
    served: ServedModel, scored: Sequence[PromptTokenLogprob], top: int
) -> list[dict | None]:
    """vLLM's ``prompt_logprobs`` list for a prompt whose tokens after the first are
    ``scored``, with ``top`` alternatives each."""
    out: list[dict | None] = [None]
    for entry in scored:
        item = {
            str(entry.token_id): {
                "logprob": clamp_logprob(entry.logprob),
                "rank": entry.rank,
                "decoded_token": logprob_token(served, entry.token_id)[0],
            }
        }
        for rank, (token_id, logprob) in enumerate(entry.top[:top], 1):
            item.setdefault(
                str(token_id),
                {
                    "logprob": clamp_logprob(logprob),
                    "rank": rank,
                    "decoded_token": logprob_token(served, token_id)[0],
                },
            )
        out.append(item)
    return out
