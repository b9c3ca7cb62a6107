"""Chat and text-completion request fields beside sampling and messages, shared by both
parsers: ``n``, ``stream_options``, vLLM's ``prompt_logprobs``, and which defaultable sampling
fields a request set itself (the model server fills the others from the checkpoint's
generation_config.json)."""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import describe, optional_bool, optional_int, require_object

MAX_CHOICES = 128  # ``n``: Workers AI's schema allows 1-128


# Fields a checkpoint's generation_config.json may default (``max_tokens``: max_new_tokens).
DEFAULTABLE = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def given_fields(body: Mapping, limit_names: tuple[str, ...]) -> frozenset[str]:
    """The defaultable fields ``body`` sets; any of ``limit_names`` counts as ``max_tokens``."""
    given = {name for name in DEFAULTABLE if body.get(name) is not None}
    if any(body.get(name) is not None for name in limit_names):
        given.add("max_tokens")
    return frozenset(given)


def choice_count(body: Mapping, path: str) -> int:
    """``n``: how many choices to generate for the prompt, 1-128 (Workers AI's schema for Kimi
    and GLM; OpenAI's own limit is 128 as well)."""
    return optional_int(body, "n", path, minimum=1, maximum=MAX_CHOICES, default=1) or 1


def stream_options(body: Mapping, stream: bool) -> tuple[bool, bool]:
    """``stream_options``: (``include_usage``, ``continuous_usage_stats``). The latter is
    vLLM's: every chunk carries the usage so far; as in vLLM it needs ``include_usage``."""
    value = body.get("stream_options")
    if value is None:
        return False, False
    if not stream:
        raise InvalidRequestField(
            "/stream_options", "no stream_options unless stream is true", "an object"
        )
    options = require_object(value, "/stream_options")
    optional_bool(options, "include_obfuscation", "/stream_options", False)
    include = optional_bool(options, "include_usage", "/stream_options", False)
    continuous = optional_bool(options, "continuous_usage_stats", "/stream_options", False)
    return include, include and continuous


def prompt_logprobs_field(body: Mapping, stream: bool) -> int | None:
    """vLLM's ``prompt_logprobs`` (chat and completions): the alternatives to list for each
    prompt token. With ``stream`` vLLM refuses any value above 0 (they would all come in one
    chunk) and takes 0 as asking for nothing a stream carries: the same here, so 0 with
    ``stream`` computes no prompt logprobs at all."""
    value = optional_int(body, "prompt_logprobs", "", minimum=0, maximum=20)
    if value is not None and stream:
        if value == 0:
            return None
        raise InvalidRequestField(
            "/prompt_logprobs",
            "null or 0 when stream is true (prompt logprobs are not streamed)",
            describe(value),
            "unsupported_value",
        )
    return value
