"""vLLM's request fields that change what is generated, on ``/v1/chat/completions`` and
``/v1/completions`` (the OpenAI dialect only: the AI gateway's Workers AI inputs have none):

- ``allowed_token_ids``: only these ids may be sampled (a non-empty array of token ids);
- ``bad_words``: words never generated, each banned as the token sequences it encodes to, with
  and without a leading space (``sampling/bans.py``);
- ``truncate_prompt_tokens``: only the prompt's last k tokens are fed (chat: of the rendered
  template); -1 keeps the context length's worth, more than the context length is a 400;
- ``cache_salt``: the request shares prefix-cache pages only with requests of the same salt
  (a string of 1 to ``MAX_CACHE_SALT`` characters; SGLang's ``/generate`` reads the same name,
  and there an empty string means none, as SGLang has it);
- chat's ``add_generation_prompt`` (default true) and ``continue_final_message`` (the prompt
  ends inside the final message, which the model continues), read as ``/tokenize`` reads them so
  that both agree on the prompt: continuing turns the generation prompt off unless the request
  asks for both, which vLLM refuses.

vLLM's chat ``echo`` is not read: it is named in the server's "fields present in the request but
ignored" log line, as any other field ember does not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import (
    at,
    describe,
    optional_bool,
    optional_int,
    token_id_list,
    wrong_type,
)

# Long enough for any tenant id or digest a gateway sends (``ember serve`` sends 64 hex
# characters), short enough that a salt costs nothing to hash and keep per cached page.
MAX_CACHE_SALT = 1024


def token_bans(data: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    """``allowed_token_ids`` and ``bad_words`` as ``SamplingOptions`` fields (only those sent)."""
    out: dict[str, Any] = {}
    if data.get("allowed_token_ids") is not None:
        allowed = token_id_list(data, "allowed_token_ids", path)
        if not allowed:
            raise InvalidRequestField(
                at(path, "allowed_token_ids"), "a non-empty array of token ids", "an empty array"
            )
        out["allowed_token_ids"] = allowed
    words = data.get("bad_words")
    if words is not None:
        where = at(path, "bad_words")
        if isinstance(words, str):
            words = [words]  # vLLM's SamplingParams takes one word as a string, too
        if not isinstance(words, list):
            raise InvalidRequestField(where, "an array of strings", describe(words))
        for i, word in enumerate(words):
            if not isinstance(word, str) or not word.strip():
                raise InvalidRequestField(at(where, i), "a word (non-blank text)", describe(word))
        out["bad_words"] = tuple(words)
    return out


def truncate_prompt_tokens(data: Mapping[str, Any]) -> int | None:
    """vLLM's ``truncate_prompt_tokens``: None (off), -1 (the context length) or k >= 1."""
    value = optional_int(data, "truncate_prompt_tokens", "", minimum=-1)
    if value == 0:
        raise InvalidRequestField(
            "/truncate_prompt_tokens",
            "an integer >= 1 (the prompt tokens to keep), or -1 (as many as the context holds)",
            "0",
        )
    return value


def generation_prompt(data: Mapping[str, Any], final_text: str) -> tuple[bool, bool]:
    """(``add_generation_prompt``, ``continue_final_message``) of a chat body whose final
    message's text is ``final_text``."""
    continue_final = optional_bool(data, "continue_final_message", "", False)
    generation = optional_bool(data, "add_generation_prompt", "", not continue_final)
    if continue_final and generation:
        raise InvalidRequestField(
            "/continue_final_message",
            "false when add_generation_prompt is true (vLLM: cannot set both)",
            "true",
        )
    if continue_final and final_text == "":
        raise InvalidRequestField(
            "/messages", "a final message with text to continue", "an empty final message"
        )
    return generation, continue_final


def cache_salt(data: Mapping[str, Any], path: str = "", empty_is_none: bool = False) -> str | None:
    """vLLM's (and SGLang's) ``cache_salt``: None when left out. vLLM refuses an empty salt;
    SGLang's ``/generate`` takes it as none (``empty_is_none``)."""
    value = data.get("cache_salt")
    where = at(path, "cache_salt")
    if value is None:
        return None
    if not isinstance(value, str):
        raise wrong_type(where, f"a string of 1 to {MAX_CACHE_SALT} characters", value)
    if value == "":
        if empty_is_none:
            return None
        raise InvalidRequestField(
            where, f"a string of 1 to {MAX_CACHE_SALT} characters", "an empty string"
        )
    if len(value) > MAX_CACHE_SALT:
        raise InvalidRequestField(
            where, f"a string of 1 to {MAX_CACHE_SALT} characters", f"{len(value)} characters"
        )
    return value
