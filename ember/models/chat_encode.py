"""Chat messages to prompt token ids, with control tokens in the *request's* text kept as text.

A chat template writes control tokens (``<|im_end|>``, ``<|user|>``, ``<tool_call>``...) around
the request's strings. If those strings themselves contain control-token text, plain encoding of
the rendered prompt would turn it into real control tokens: a user could close their own turn and
forge a system or tool turn. ``encode_chat`` marks every control-token string inside the request
(messages, tools, template kwargs) with private-use delimiters before rendering, then encodes the
marked spans as plain text and everything the template wrote as usual (HF transformers offers the
same as ``sanitize_control_tokens``). Marker characters arriving in the request become U+FFFD, so
they cannot be forged. Assistant turns are left as they are: they are the model's own output, which
templates parse (see ``_mark_message``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ember.models.tokenizer import Tokenizer

OPEN, CLOSE = "\U000f0000", "\U000f0001"
_MARKERS = re.compile(f"[{OPEN}{CLOSE}]")


def _mark(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        clean = _MARKERS.sub("\ufffd", value)
        return pattern.sub(lambda m: OPEN + m.group(0) + CLOSE, clean)
    if isinstance(value, Mapping):
        return {k: _mark(v, pattern) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mark(v, pattern) for v in value]
    return value


def _mark_message(message: Mapping[str, Any], pattern: re.Pattern[str]) -> Any:
    # Assistant turns are the model's own earlier output, which templates parse (GLM splits
    # content at "</think>"); marking them would change how that history renders.
    return message if message.get("role") == "assistant" else _mark(message, pattern)


def encode_marked(tokenizer: Tokenizer, text: str) -> list[int]:
    """Encode rendered text: spans between markers as plain text, the rest with control tokens."""
    ids: list[int] = []
    plain = False
    for part in re.split(f"({OPEN}|{CLOSE})", text):
        if part in (OPEN, CLOSE):
            plain = part == OPEN
        elif part:
            ids += tokenizer.encode(part, allow_special=not plain)
    return ids


def encode_chat(
    tokenizer: Tokenizer,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    sanitize: bool = True,
) -> list[int]:
    """Prompt token ids for a chat request (see the module docstring for ``sanitize``)."""
    if not sanitize:
        text = tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            chat_template_kwargs=chat_template_kwargs,
        )
        return tokenizer.encode(text)
    pattern = tokenizer.control_text_pattern
    text = tokenizer.apply_chat_template(
        [_mark_message(m, pattern) for m in messages],
        tools=_mark(list(tools), pattern) if tools is not None else None,
        add_generation_prompt=add_generation_prompt,
        chat_template_kwargs=_mark(dict(chat_template_kwargs or {}), pattern),
    )
    return encode_marked(tokenizer, text)
