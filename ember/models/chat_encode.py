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

from ember.errors import InvalidModelInput
from ember.models.tokenizer import Tokenizer

OPEN, CLOSE = "\U000f0000", "\U000f0001"
_MARKERS = re.compile(f"[{OPEN}{CLOSE}]")


def _mark(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        # The search first: scanning 2 MB with the regex took 56 ms (holding the GIL), the
        # substring test ~1 ms, and a request seldom holds a marker.
        clean = _MARKERS.sub("\ufffd", value) if OPEN in value or CLOSE in value else value
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
    continue_final_message: bool = False,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    sanitize: bool = True,
) -> list[int]:
    """Prompt token ids for a chat request (see the module docstring for ``sanitize``).
    ``continue_final_message``: the prompt ends inside the final message, right after its
    content (vLLM's and transformers' prefill: the model continues that message)."""
    if not sanitize:
        text = tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            chat_template_kwargs=chat_template_kwargs,
        )
        if continue_final_message:
            text = _open_final_message(text, messages[-1])
        return tokenizer.encode(text)
    text = render_chat(
        tokenizer,
        messages,
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
        chat_template_kwargs=chat_template_kwargs,
    )
    return encode_marked(tokenizer, text)


def render_chat(
    tokenizer: Tokenizer,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The rendered prompt with the request's control-token text marked: what ``encode_marked``
    encodes (``encode_chat`` is the two in a row). A server checks its size in between."""
    pattern = tokenizer.control_text_pattern
    marked = [_mark_message(m, pattern) for m in messages]
    text = tokenizer.apply_chat_template(
        marked,
        tools=_mark(list(tools), pattern) if tools is not None else None,
        add_generation_prompt=add_generation_prompt,
        chat_template_kwargs=_mark(dict(chat_template_kwargs or {}), pattern),
    )
    if continue_final_message:
        text = _open_final_message(text, marked[-1])
    return text


def marked_text_bytes(text: str) -> int:
    """The UTF-8 bytes ``encode_marked`` encodes of ``text``: all but the markers'."""
    markers = text.count(OPEN) + text.count(CLOSE)
    return len(text.encode("utf-8")) - markers * len(OPEN.encode("utf-8"))


def _open_final_message(text: str, final: Mapping[str, Any]) -> str:
    """``text`` cut right after the final message's content, as transformers cuts it for
    ``continue_final_message`` (the template's end-of-turn after it goes)."""
    content = final.get("content")
    content = content if isinstance(content, str) else ""
    for wanted in (content, content.strip()):
        at = text.rfind(wanted) if wanted else -1
        if at >= 0:
            return text[: at + len(wanted)]
    raise InvalidModelInput(
        "continue_final_message",
        "the final message does not appear in the prompt the chat template renders, so it "
        "cannot be continued",
    )
