"""A ``chat.completion.chunk`` stream -> the Responses API's event stream.

    response.created, response.in_progress
    per output item: response.output_item.added
        message:   content_part.added, output_text.delta..., output_text.done, content_part.done
        reasoning: content_part.added, reasoning_text.delta..., reasoning_text.done,
                   content_part.done
                   (a summary asked for: reasoning_summary_part.added first, a
                   reasoning_summary_text.delta before each reasoning_text.delta, and
                   reasoning_summary_text.done, reasoning_summary_part.done before
                   reasoning_text.done: the summary's events in OpenAI's order, the content's
                   kept as vLLM sends them)
        function_call: function_call_arguments.delta..., function_call_arguments.done
      response.output_item.done
    response.completed, with usage; response.incomplete instead (status "incomplete",
    incomplete_details) when max_output_tokens cut it

Every event has ``type`` and a ``sequence_number`` counting from 0. A chunk that carries an
``error`` (a stream that failed midway, from ember's chat stream or a replica's) ends the stream
with an ``error`` event and ``response.failed``. Items open as their first delta arrives and
close when another kind of delta (or the end) comes, so reasoning, text and calls follow the
order the model wrote them in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.models.api.responses_object import (
    finish_status,
    function_call_item,
    item_id,
    message_item,
    reasoning_item,
    reasoning_part,
    response_object,
    summary_part,
    text_part,
    usage_of,
)

Event = dict[str, Any]


def encode(event: Event) -> bytes:
    """One SSE event, named as OpenAI names them (``event: <type>``)."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


@dataclass
class _Open:
    """The output item being written."""

    kind: str  # message / reasoning / function_call
    id: str
    index: int
    text: str = ""
    call_id: str = ""
    name: str = ""
    tool_index: int | None = None


@dataclass
class ResponseEvents:
    """The events of one streamed response; ``response`` is the last response object sent."""

    id: str
    model: str
    created_at: int
    echo: Mapping[str, Any]
    summary: bool = False  # reasoning items carry their text as a summary too
    sequence: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)
    current: _Open | None = None
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    response: dict[str, Any] | None = None
    done: bool = False

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        self.response = response_object(
            id=self.id,
            model=self.model,
            created_at=self.created_at,
            echo=self.echo,
            output=self.items if status != "in_progress" else (),
            status=status,
            **fields,
        )
        return self.response

    def start(self) -> list[Event]:
        response = self._response("in_progress")
        return [
            self._event("response.created", response=response),
            self._event("response.in_progress", response=response),
        ]

    def feed(self, chunk: Mapping[str, Any]) -> list[Event]:
        """The events for one chat chunk (maybe none)."""
        if self.done:
            return []
        if "error" in chunk:
            error = chunk["error"] if isinstance(chunk["error"], Mapping) else {}
            return self.fail(str(error.get("message") or chunk["error"]), error.get("code"))
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        events: list[Event] = []
        for choice in (chunk.get("choices") or [])[:1]:
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                events += self._text("reasoning", delta["reasoning_content"])
            if delta.get("content"):
                events += self._text("message", delta["content"])
            for call in delta.get("tool_calls") or []:
                events += self._call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def _text(self, kind: str, delta: str) -> list[Event]:
        events: list[Event] = []
        if self.current is None or self.current.kind != kind:
            events += self._close()
            prefix = "msg" if kind == "message" else "rs"
            events += self._open(_Open(kind, item_id(prefix), len(self.items)))
        current = self.current
        assert current is not None  # just opened
        current.text += delta
        where = {"item_id": current.id, "output_index": current.index, "content_index": 0}
        if kind == "message":
            events.append(
                self._event("response.output_text.delta", **where, delta=delta, logprobs=[])
            )
        else:
            if self.summary:
                events.append(self._summary_event("text.delta", current, delta=delta))
            events.append(self._event("response.reasoning_text.delta", **where, delta=delta))
        return events

    def _summary_event(self, kind: str, current: _Open, **fields: Any) -> Event:
        """A ``response.reasoning_summary_<kind>`` event of the item's one summary part."""
        return self._event(
            f"response.reasoning_summary_{kind}",
            item_id=current.id,
            output_index=current.index,
            summary_index=0,
            **fields,
        )

    def _call(self, call: Mapping[str, Any]) -> list[Event]:
        events: list[Event] = []
        function = call.get("function") or {}
        index = call.get("index")
        current = self.current
        if current is None or current.kind != "function_call" or current.tool_index != index:
            events += self._close()
            current = _Open("function_call", item_id("fc"), len(self.items), tool_index=index)
            current.call_id = str(call.get("id") or item_id("call"))
            current.name = str(function.get("name") or "")
            events += self._open(current)
        elif function.get("name"):
            current.name += function["name"]
        arguments = function.get("arguments") or ""
        if arguments:
            current.text += arguments
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=current.id,
                    output_index=current.index,
                    delta=arguments,
                )
            )
        return events

    def _item(self, current: _Open, status: str) -> dict[str, Any]:
        if current.kind == "message":
            return message_item(current.id, current.text, status)
        if current.kind == "reasoning":
            return reasoning_item(current.id, current.text, status, self.summary)
        return function_call_item(current.id, current.call_id, current.name, current.text, status)

    def _open(self, current: _Open) -> list[Event]:
        self.current = current
        item = self._item(current, "in_progress")
        if current.kind != "function_call":
            item["content"] = []
        if current.kind == "reasoning":
            item["summary"] = []
        events = [self._event("response.output_item.added", output_index=current.index, item=item)]
        if current.kind == "reasoning" and self.summary:
            events.append(self._summary_event("part.added", current, part=summary_part("")))
        if current.kind != "function_call":
            part = text_part("") if current.kind == "message" else reasoning_part("")
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=current.id,
                    output_index=current.index,
                    content_index=0,
                    part=part,
                )
            )
        return events

    def _close(self, status: str = "completed") -> list[Event]:
        current = self.current
        if current is None:
            return []
        self.current = None
        item = self._item(current, status)
        self.items.append(item)
        where = {"item_id": current.id, "output_index": current.index}
        events: list[Event] = []
        if current.kind == "function_call":
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    **where,
                    arguments=current.text,
                    name=current.name,
                )
            )
        else:
            if current.kind == "reasoning" and self.summary:
                events.append(self._summary_event("text.done", current, text=current.text))
                # OpenAI's part.done has status only when generation was interrupted.
                cut = {"status": "incomplete"} if status == "incomplete" else {}
                part = item["summary"][0]
                events.append(self._summary_event("part.done", current, part=part, **cut))
            kind = "output_text" if current.kind == "message" else "reasoning_text"
            extra = {"logprobs": []} if current.kind == "message" else {}
            events.append(
                self._event(
                    f"response.{kind}.done", **where, content_index=0, text=current.text, **extra
                )
            )
            events.append(
                self._event(
                    "response.content_part.done", **where, content_index=0, part=item["content"][0]
                )
            )
        events.append(
            self._event("response.output_item.done", output_index=current.index, item=item)
        )
        return events

    def finish(self) -> list[Event]:
        """The closing events, once the chat stream ended."""
        if self.done:
            return []
        self.done = True
        status, reason = finish_status(self.finish_reason)
        events = self._close("incomplete" if status == "incomplete" else "completed")
        response = self._response(status, incomplete_reason=reason, usage=usage_of(self.usage))
        # Named after how it ended, as OpenAI sends it: response.incomplete (with
        # incomplete_details) when max_output_tokens cut it. (vLLM sends response.completed
        # either way; the openai client's get_final_response() wants that one, so a client of
        # an incomplete stream reads the response from this last event, as against OpenAI.)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        events.append(self._event(kind, response=response))
        return events

    def fail(self, message: str, code: object = None) -> list[Event]:
        """An ``error`` event and ``response.failed``: the stream failed midway."""
        if self.done:
            return []
        self.done = True
        events = self._close("incomplete")
        code_text = None if code is None else str(code)
        events.append(self._event("error", code=code_text, message=message, param=None))
        error = {"code": code_text or "server_error", "message": message}
        response = self._response("failed", error=error, usage=usage_of(self.usage))
        events.append(self._event("response.failed", response=response))
        return events
