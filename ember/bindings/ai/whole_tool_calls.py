"""Tool calls in Workers AI's stream of a family-B model: one complete delta each.

A replica streams a tool call OpenAI's way: a first piece with the call's ``index``, ``id``,
``type`` and ``function.name``, then ``function.arguments`` in fragments. That stays the shape of
``/ai/v1/chat/completions``. The platform's glm-4.7-flash sends each call as one delta holding
all of it, ``index``, ``id``, ``type``, ``function.name`` and the whole ``arguments`` string
(reference/workers-api.md section 1.5), the shape workers-ai-provider's fixtures have too, so
``env.AI.run`` and REST ``ai/run`` join the pieces: a client written against the platform may
``json.loads`` the first ``arguments`` it sees.

``WholeToolCalls`` sits in front of the dialect's ``StreamTranslator`` (the same interface). A
call is complete when its choice moves on: a piece of another call, text (content or
reasoning), or a ``finish_reason``; every open call is complete at the usage chunk, an error,
``[DONE]`` or the end of the stream. Each goes out then, in the chunk of its first piece (id,
created, model), with its pieces' logprobs. Everything else passes through as it came, and a
chunk with no ``"tool_calls"`` in it, while no call is open, is not even parsed. A chunk of
several choices (no backend sends one) closes the open calls and passes through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ember.bindings.ai.dialects import StreamTranslator
from ember.models.pool.errors import InvalidEvent

_MARKER = '"tool_calls"'
_TEXT = ("content", "reasoning_content", "reasoning")


@dataclass(slots=True)
class _Call:
    """One call's pieces so far, and the chunk to send it in."""

    envelope: dict[str, Any]  # the chunk's fields other than ``choices``
    index: object
    id: object = None
    type: object = None
    name: str = ""
    arguments: str = ""
    logprobs: list[Any] = field(default_factory=list)

    def add(self, piece: dict[str, Any]) -> None:
        self.id = self.id if self.id is not None else piece.get("id")
        self.type = self.type if self.type is not None else piece.get("type")
        function = piece.get("function") if isinstance(piece.get("function"), dict) else {}
        self.name += function.get("name") or ""
        self.arguments += function.get("arguments") or ""

    def chunk(self, choice: int) -> dict[str, Any]:
        call: dict[str, Any] = {"index": self.index, "id": self.id, "type": self.type or "function"}
        call["function"] = {"name": self.name, "arguments": self.arguments}
        logprobs = {"content": self.logprobs} if self.logprobs else None
        whole = {"index": choice, "delta": {"tool_calls": [call]}, "logprobs": logprobs}
        return {**self.envelope, "choices": [{**whole, "finish_reason": None}]}


def _encode(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _is_error(payload: object) -> bool:
    """An error event (a replica's, or the pool's mid-stream failure): it ends the stream."""
    return isinstance(payload, dict) and ("error" in payload or "errors" in payload)


def _has_text(delta: dict[str, Any]) -> bool:
    return any(isinstance(delta.get(key), str) and delta[key] for key in _TEXT)


def _logprob_tokens(choice: dict[str, Any]) -> list[Any]:
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return content if isinstance(content, list) else []


class ToolCallJoiner:
    """Replica events in, the same events with each call's pieces joined out (``feed`` per
    event, ``end`` once the replica stopped)."""

    def __init__(self) -> None:
        self._open: dict[int, dict[object, _Call]] = {}  # choice -> call index -> call

    def feed(self, data: str) -> list[str]:
        if not self._open and _MARKER not in data:
            return [data]
        if data == "[DONE]":
            return [*self.end(), data]
        try:
            payload = json.loads(data)
        except ValueError:
            raise InvalidEvent(data) from None
        if _is_error(payload):  # a call it cut is no call: a client would json.loads it first
            self._open.clear()
            return [data]
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return [*self.end(), data]  # usage, or several choices at once
        choice = choices[0]
        index = choice.get("index") if isinstance(choice.get("index"), int) else 0
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        pieces = delta.get("tool_calls")
        finish = choice.get("finish_reason")
        if not isinstance(pieces, list) or not pieces:
            return [*self._close(index), data] if finish or _has_text(delta) else [data]
        out = self._close(index) if _has_text(delta) else []
        # Fields a server sends as null beside the pieces (role, content) are no text to stream.
        rest = {
            key: value for key, value in delta.items() if key != "tool_calls" and value is not None
        }
        envelope = {key: value for key, value in payload.items() if key != "choices"}
        if rest:  # text before the calls: it streams now, with the chunk's logprobs
            out.append(
                _encode({**payload, "choices": [{**choice, "delta": rest, "finish_reason": None}]})
            )
        calls = self._open.setdefault(index, {})
        for piece in pieces:
            if not isinstance(piece, dict):
                continue
            key = piece["index"] if isinstance(piece.get("index"), int) else _latest(calls)
            if key not in calls:  # a new call: the earlier ones are done
                out += self._close(index)
                calls = self._open.setdefault(index, {})  # begun last, so closed last at the end
                calls[key] = _Call(envelope, key)
            calls[key].add(piece)
        if not rest:
            last = next(reversed(calls.values()), None)
            if last is not None:
                last.logprobs += _logprob_tokens(choice)
        if finish:
            out += self._close(index)
            ended = {**choice, "delta": {}, "logprobs": None}
            out.append(_encode({**payload, "choices": [ended]}))
        return out

    def _close(self, choice: int) -> list[str]:
        calls = self._open.pop(choice, {})
        return [_encode(call.chunk(choice)) for call in calls.values()]

    def end(self) -> list[str]:
        return [event for choice in list(self._open) for event in self._close(choice)]


def _latest(calls: dict[object, _Call]) -> object:
    """The call a piece without an ``index`` continues: the last one begun (0 for the first)."""
    return next(reversed(calls), 0)


class WholeToolCalls:
    """``StreamTranslator``'s interface: ``ToolCallJoiner`` in front of one."""

    def __init__(self, translator: StreamTranslator) -> None:
        self._translator = translator
        self._joiner = ToolCallJoiner()

    @property
    def done(self) -> bool:
        return self._translator.done

    @property
    def thinking_ate_answer(self) -> bool:
        return self._translator.thinking_ate_answer

    def feed(self, data: str) -> bytes:
        if self._translator.done:
            return b""
        return b"".join(self._translator.feed(event) for event in self._joiner.feed(data))

    def end(self) -> bytes:
        if self._translator.done:
            return b""
        joined = b"".join(self._translator.feed(event) for event in self._joiner.end())
        return joined + self._translator.end()


def reference_whole_tool_calls(events: list[str]) -> list[object]:
    """The slow reference of ``ToolCallJoiner``: every event parsed, the calls of each choice
    kept as a list. Returns the events the translator should get (payloads, ``"[DONE]"`` as
    the string); tests compare the fast path with this on random streams."""
    out: list[object] = []
    open_calls: dict[int, list[dict[str, Any]]] = {}

    def close(choice: int) -> None:
        for call in open_calls.pop(choice, []):
            whole = {
                "index": call["index"],
                "id": call["id"],
                "type": call["type"] or "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            logprobs = {"content": call["logprobs"]} if call["logprobs"] else None
            wrapped = {"index": choice, "delta": {"tool_calls": [whole]}, "logprobs": logprobs}
            out.append({**call["envelope"], "choices": [{**wrapped, "finish_reason": None}]})

    def close_all() -> None:
        for choice in list(open_calls):
            close(choice)

    for data in events:
        if data == "[DONE]":
            close_all()
            out.append(data)
            continue
        try:
            payload = json.loads(data)
        except ValueError:
            raise InvalidEvent(data) from None
        if isinstance(payload, dict) and ("error" in payload or "errors" in payload):
            open_calls.clear()  # cut by the error: never sent as if whole
            out.append(payload)
            continue
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            close_all()
            out.append(payload)
            continue
        choice = choices[0]
        number = choice.get("index") if isinstance(choice.get("index"), int) else 0
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        pieces = delta.get("tool_calls") if isinstance(delta.get("tool_calls"), list) else []
        texted = any(isinstance(delta.get(k), str) and delta[k] != "" for k in _TEXT)
        if texted:
            close(number)
        if not pieces:
            if choice.get("finish_reason"):
                close(number)
            out.append(payload)
            continue
        rest = {k: v for k, v in delta.items() if k != "tool_calls" and v is not None}
        if rest:
            out.append({**payload, "choices": [{**choice, "delta": rest, "finish_reason": None}]})
        calls = open_calls.setdefault(number, [])
        for piece in [p for p in pieces if isinstance(p, dict)]:
            index = piece.get("index")
            if not isinstance(index, int):
                index = calls[-1]["index"] if calls else 0
            if not calls or all(call["index"] != index for call in calls):
                close(number)
                calls = open_calls.setdefault(number, [])
                envelope = {k: v for k, v in payload.items() if k != "choices"}
                calls.append(
                    {"envelope": envelope, "index": index, "id": None, "type": None}
                    | {"name": "", "arguments": "", "logprobs": []}
                )
            call = next(call for call in calls if call["index"] == index)
            function = piece.get("function") if isinstance(piece.get("function"), dict) else {}
            call["id"] = piece.get("id") if call["id"] is None else call["id"]
            call["type"] = piece.get("type") if call["type"] is None else call["type"]
            call["name"] += function.get("name") or ""
            call["arguments"] += function.get("arguments") or ""
        if not rest and calls:
            calls[-1]["logprobs"] += _logprob_tokens(choice)
        if choice.get("finish_reason"):
            close(number)
            out.append({**payload, "choices": [{**choice, "delta": {}, "logprobs": None}]})
    close_all()
    return out
