"""``/tokenize`` and ``/detokenize`` request bodies, vLLM's and SGLang's, into typed requests.

vLLM (``TokenizeCompletionRequest`` / ``TokenizeChatRequest``, ``DetokenizeRequest``):
``{prompt, add_special_tokens=true, return_token_strs}`` or ``{messages, add_generation_prompt=
true, continue_final_message, add_special_tokens=false, chat_template_kwargs, tools,
return_token_strs}``; ``{tokens: [ids]}``. SGLang (``TokenizeRequest``, ``DetokenizeRequest``) takes
the same fields plus a batch: ``prompt`` may be a list of strings and ``tokens`` a list of id
lists (with ``skip_special_tokens``). One parser serves both; the routes choose the answer's shape.
Every invalid field raises ``InvalidRequestField`` naming it. Token ids are checked against the
vocabulary by the server, which knows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ember.models.api.chat_request import ChatRequest, parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, optional_bool, optional_str, require_object, wrong_type
from ember.models.api.vllm_fields import generation_prompt

# The chat request fields that reach the template, as /v1/chat/completions reads them.
CHAT_TEMPLATE_FIELDS = (
    "messages",
    "tools",
    "tool_choice",
    "chat_template_kwargs",
    "reasoning_effort",
)


@dataclass(frozen=True, slots=True)
class TokenizeRequest:
    """Exactly one of ``prompts`` (the completion form) and ``chat`` (the chat form)."""

    model: str | None
    prompts: tuple[str, ...] | None
    chat: ChatRequest | None
    batched: bool  # SGLang's list of prompts: answered with lists
    add_special_tokens: bool
    add_generation_prompt: bool
    continue_final_message: bool
    return_token_strs: bool


@dataclass(frozen=True, slots=True)
class DetokenizeRequest:
    model: str | None
    token_lists: tuple[tuple[int, ...], ...]
    batched: bool  # SGLang's list of id lists: answered with a list of texts
    skip_special_tokens: bool | None  # None: the route's default


def parse_tokenize_request(body: object) -> TokenizeRequest:
    data = require_object(body, "/")
    has_prompt, has_messages = data.get("prompt") is not None, data.get("messages") is not None
    if has_prompt and has_messages:
        raise InvalidRequestField("/", "exactly one of 'prompt' or 'messages'", "both")
    if not has_prompt and not has_messages:
        raise InvalidRequestField(
            "/prompt", "a prompt (or 'messages')", "nothing", "missing_required_parameter"
        )
    model = optional_str(data, "model", "")
    token_strs = optional_bool(data, "return_token_strs", "", False)
    if has_prompt:
        prompts, batched = _prompts(data["prompt"])
        return TokenizeRequest(
            model=model,
            prompts=prompts,
            chat=None,
            batched=batched,
            add_special_tokens=optional_bool(data, "add_special_tokens", "", True),
            add_generation_prompt=False,
            continue_final_message=False,
            return_token_strs=token_strs,
        )
    if data.get("chat_template") is not None:
        # vLLM refuses a request's own template unless started with
        # --trust-request-chat-template; ember renders only the checkpoint's.
        raise InvalidRequestField(
            "/chat_template",
            "no per-request chat template (the model's own is used)",
            "a template",
            "unsupported_parameter",
        )
    chat = parse_chat_request({k: data[k] for k in CHAT_TEMPLATE_FIELDS if k in data})
    generation_prompt_on, continue_final = generation_prompt(data, chat.messages[-1].text())
    return TokenizeRequest(
        model=model,
        prompts=None,
        chat=chat,
        batched=False,
        add_special_tokens=optional_bool(data, "add_special_tokens", "", False),
        add_generation_prompt=generation_prompt_on,
        continue_final_message=continue_final,
        return_token_strs=token_strs,
    )


def _prompts(value: Any) -> tuple[tuple[str, ...], bool]:
    if isinstance(value, str):
        return (value,), False
    if not isinstance(value, list) or not value:
        raise wrong_type("/prompt", "a string or a non-empty array of strings", value)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise wrong_type(at("/prompt", i), "a string", item)
    return tuple(value), True


def parse_detokenize_request(body: object) -> DetokenizeRequest:
    data = require_object(body, "/")
    if data.get("tokens") is None:
        raise InvalidRequestField(
            "/tokens", "an array of token ids", "nothing", "missing_required_parameter"
        )
    value = data["tokens"]
    if not isinstance(value, list):
        raise wrong_type("/tokens", "an array of token ids (or of arrays of them)", value)
    batched = bool(value) and all(isinstance(item, list) for item in value)
    lists = [_ids(item, at("/tokens", i)) for i, item in enumerate(value)] if batched else None
    skip = None
    if data.get("skip_special_tokens") is not None:
        skip = optional_bool(data, "skip_special_tokens", "", False)
    return DetokenizeRequest(
        model=optional_str(data, "model", ""),
        token_lists=tuple(lists) if lists is not None else (_ids(value, "/tokens"),),
        batched=batched,
        skip_special_tokens=skip,
    )


def _ids(value: list, path: str) -> tuple[int, ...]:
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise wrong_type(at(path, i), "a token id (a non-negative integer)", item)
    return tuple(value)


def out_of_vocabulary(request: DetokenizeRequest, vocab_size: int) -> InvalidRequestField | None:
    """The error for the first id past the vocabulary, naming where it was sent."""
    for i, ids in enumerate(request.token_lists):
        where = at("/tokens", i) if request.batched else "/tokens"
        for j, token in enumerate(ids):
            if token >= vocab_size:
                return InvalidRequestField(
                    at(where, j),
                    f"a token id in this model's vocabulary (0..{vocab_size - 1})",
                    f"token id {token}",
                )
    return None
