"""Response objects: ``chat.completion``, ``chat.completion.chunk`` streams and
``text_completion``, with usage (cached and reasoning tokens) and logprobs (SGLang's
``/generate`` answers: ``generate_response``)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ember.models.api.deltas import DeltaMessage, OutputAccumulator, ParsedOutput
from ember.models.api.output_parser import ChatOutputParser

FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "abort")


def new_id(prefix: str = "chatcmpl-") -> str:
    return prefix + secrets.token_hex(12)


def now() -> int:
    return int(time.time())


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int | None = None

    def to_dict(self) -> dict:
        out: dict = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }
        if self.reasoning_tokens is not None:
            out["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return out


@dataclass(frozen=True)
class TokenLogprob:
    """One sampled token's log probability and, optionally, the top alternatives."""

    token: str
    logprob: float | None  # None: the first prompt token (echoed), which has no context
    top: tuple[TokenLogprob, ...] = field(default=())
    raw: bytes | None = None  # the token's bytes when ``token`` is not whole UTF-8

    def to_dict(self, with_top: bool = True) -> dict:
        data = self.raw if self.raw is not None else self.token.encode("utf-8")
        out: dict = {"token": self.token, "logprob": self.logprob, "bytes": list(data)}
        if with_top:
            out["top_logprobs"] = [t.to_dict(with_top=False) for t in self.top]
        return out


def chat_logprobs(tokens: Sequence[TokenLogprob] | None) -> dict | None:
    if tokens is None:
        return None
    return {"content": [t.to_dict() for t in tokens], "refusal": None}


def final_finish_reason(finish_reason: str, has_tool_calls: bool, named_tool: bool = False) -> str:
    """``tool_calls`` when the model stopped after calling tools, unless the request named the
    function (``tool_choice: {"type": "function", ...}``): OpenAI and vLLM answer ``stop`` for
    a named function and ``tool_calls`` for ``auto`` / ``required`` (vLLM's serving_chat.py,
    both generators), where SGLang answers ``tool_calls`` for both."""
    if finish_reason not in FINISH_REASONS:
        raise ValueError(f"finish_reason must be one of {FINISH_REASONS}, got {finish_reason!r}")
    called = has_tool_calls and not named_tool
    return "tool_calls" if called and finish_reason == "stop" else finish_reason


def chat_message(output: ParsedOutput) -> dict:
    message: dict = {"role": "assistant", "content": output.content, "refusal": None}
    if output.reasoning is not None:
        # SGLang's name and current vLLM's, so clients of either find it.
        message["reasoning_content"] = message["reasoning"] = output.reasoning
    if output.tool_calls:
        message["tool_calls"] = [call.to_dict() for call in output.tool_calls]
    return message


def chat_completion(
    *,
    id: str,
    created: int,
    model: str,
    output: ParsedOutput,
    finish_reason: str,
    usage: Usage,
    logprobs: Sequence[TokenLogprob] | None = None,
    matched_stop: str | int | None = None,
) -> dict:
    """A non-streaming ``chat.completion`` (``arguments`` are JSON strings) with one choice
    (``n`` choices: ``chat_completion_of``). ``matched_stop``: SGLang's extension, the stop
    string or token id (EOS included) that ended the output."""
    choice = chat_choice(0, output, finish_reason, logprobs, matched_stop)
    return chat_completion_of(id=id, created=created, model=model, choices=[choice], usage=usage)


def chat_completion_of(
    *, id: str, created: int, model: str, choices: Sequence[dict], usage: Usage
) -> dict:
    """A ``chat.completion`` of ``chat_choice`` entries (``n`` choices)."""
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": list(choices),
        "usage": usage.to_dict(),
        "system_fingerprint": None,
    }


def chat_choice(
    index: int,
    output: ParsedOutput,
    finish_reason: str,
    logprobs: Sequence[TokenLogprob] | None = None,
    matched_stop: str | int | None = None,
    stop_reason: str | int | None = None,
    *,
    named_tool: bool = False,
) -> dict:
    """One entry of a ``chat.completion``'s ``choices``. ``stop_reason``: vLLM's, the stop
    string or ``stop_token_ids`` entry that ended the output (null for EOS and length);
    ``named_tool``: the request named the function to call (``final_finish_reason``)."""
    return {
        "index": index,
        "message": chat_message(output),
        "logprobs": chat_logprobs(logprobs),
        "finish_reason": final_finish_reason(finish_reason, bool(output.tool_calls), named_tool),
        "stop_reason": stop_reason,
        "matched_stop": matched_stop,
    }


class ChatStream:
    """Builds the ``chat.completion.chunk`` objects of one streamed answer.

    ``start()`` once (the role chunk), ``text(delta)`` per detokenized piece, ``finish()`` at
    the end (the finish chunk, then the usage chunk when ``include_usage``). ``message()``
    is the whole message sent so far (for logs and caches). With ``continuous_usage``, set
    ``usage`` before each call: every chunk carries it. ``index``: the choice this stream
    builds (``n`` choices: one ``ChatStream`` each, their chunks interleaved). ``named_tool``:
    the request named the function to call, so a call finishes with ``stop``
    (``final_finish_reason``).
    """

    def __init__(
        self,
        *,
        id: str,
        created: int,
        model: str,
        parser: ChatOutputParser,
        include_usage: bool = False,
        continuous_usage: bool = False,
        index: int = 0,
        named_tool: bool = False,
    ) -> None:
        self.id = id
        self.named_tool = named_tool
        self.index = index
        self.created = created
        self.model = model
        self.parser = parser
        self.include_usage = include_usage
        # vLLM's continuous_usage_stats: each chunk carries ``usage`` (the counts so far)
        # instead of null; the caller keeps it current.
        self.continuous_usage = include_usage and continuous_usage
        self.usage: Usage | None = None
        self.total = OutputAccumulator()
        self.pending_logprobs: list[TokenLogprob] = []
        self.want_logprobs = False

    def _chunk(self, delta: dict, finish_reason: str | None = None) -> dict:
        logprobs = None
        if self.want_logprobs and self.pending_logprobs:
            logprobs = chat_logprobs(self.pending_logprobs)
            self.pending_logprobs = []
        chunk: dict = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": self.index,
                    "delta": delta,
                    "logprobs": logprobs,
                    "finish_reason": finish_reason,
                }
            ],
        }
        if self.include_usage:
            running = self.usage if self.continuous_usage else None
            chunk["usage"] = running.to_dict() if running is not None else None
        return chunk

    def start(self) -> dict:
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, delta_text: str, logprobs: Sequence[TokenLogprob] | None = None) -> list[dict]:
        """Chunks for a new piece of output text (none while the parser holds text back; the
        piece's logprobs then ride on the next chunk)."""
        if logprobs is not None:
            self.want_logprobs = True
            self.pending_logprobs.extend(logprobs)
        return self._emit(self.parser.feed(delta_text))

    def _emit(self, delta: DeltaMessage) -> list[dict]:
        if delta.is_empty():
            return []
        self.total.add(delta)
        return [self._chunk(delta.to_dict())]

    def finish(
        self,
        finish_reason: str,
        usage: Usage | None = None,
        matched_stop: str | int | None = None,
        stop_reason: str | int | None = None,
    ) -> list[dict]:
        chunks = self._emit(self.parser.finish())
        reason = final_finish_reason(finish_reason, bool(self.total.heads), self.named_tool)
        last = self._chunk({}, reason)
        last["choices"][0]["stop_reason"] = stop_reason  # vLLM's, on the finish chunk
        last["choices"][0]["matched_stop"] = matched_stop  # SGLang's, on the finish chunk
        chunks.append(last)
        if self.include_usage and usage is not None:
            chunks.append(self.usage_chunk(usage))
        return chunks

    def usage_chunk(self, usage: Usage) -> dict:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [],
            "usage": usage.to_dict(),
        }

    def message(self) -> ParsedOutput:
        return self.total.result()


def text_completion(
    *,
    id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    usage: Usage,
    logprobs: dict | None = None,
    matched_stop: str | int | None = None,
) -> dict:
    """A non-streaming ``text_completion`` with one choice (``n`` choices:
    ``text_completion_of``); ``matched_stop`` as in ``chat_completion``."""
    choice = text_choice(0, text, finish_reason, logprobs, matched_stop)
    return text_completion_of(id=id, created=created, model=model, choices=[choice], usage=usage)


def text_completion_of(
    *, id: str, created: int, model: str, choices: Sequence[dict], usage: Usage
) -> dict:
    """A ``text_completion`` of ``text_choice`` entries (``n`` choices)."""
    return {
        "id": id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": list(choices),
        "usage": usage.to_dict(),
        "system_fingerprint": None,
    }


def text_choice(
    index: int,
    text: str,
    finish_reason: str,
    logprobs: dict | None = None,
    matched_stop: str | int | None = None,
    stop_reason: str | int | None = None,
) -> dict:
    """One entry of a ``text_completion``'s ``choices`` (``stop_reason`` as in
    ``chat_choice``)."""
    return {
        "index": index,
        "text": text,
        "logprobs": logprobs,
        "finish_reason": finish_reason,
        "stop_reason": stop_reason,
        "matched_stop": matched_stop,
    }


def text_completion_chunk(
    *,
    id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str | None = None,
    logprobs: dict | None = None,
    include_usage: bool = False,
    usage: Usage | None = None,
    matched_stop: str | int | None = None,
    index: int = 0,
    stop_reason: str | int | None = None,
) -> dict:
    """One streamed ``text_completion`` chunk (of choice ``index``). With ``include_usage`` it
    has a ``usage`` key: null, as OpenAI sends on every chunk but the last, or ``usage``, the
    counts so far (vLLM's continuous_usage_stats)."""
    chunk: dict = {
        "id": id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}
        ],
    }
    if finish_reason is not None:
        chunk["choices"][0]["stop_reason"] = stop_reason  # vLLM's, on the finish chunk
        chunk["choices"][0]["matched_stop"] = matched_stop  # SGLang's, on the finish chunk
    if include_usage:
        chunk["usage"] = usage.to_dict() if usage is not None else None
    return chunk


def completion_logprobs(tokens: Sequence[TokenLogprob], start_offset: int = 0) -> dict:
    """The legacy completions logprobs object (tokens, token_logprobs, top_logprobs,
    text_offset); a token without a logprob (the first echoed prompt token) has null in
    token_logprobs and top_logprobs, as in OpenAI's and vLLM's answers."""
    offsets, offset = [], start_offset
    for t in tokens:
        offsets.append(offset)
        offset += len(t.token)
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [
            None if t.logprob is None else {alt.token: alt.logprob for alt in t.top} for t in tokens
        ],
        "text_offset": offsets,
    }
