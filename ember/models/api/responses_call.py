"""One ``POST /v1/responses`` request over a chat-completions backend, the same for every front:
ember's model server (its own chat path) and the runtime's AI routes (the gateway's replicas).

    call = ResponsesCall(body, store, scope, default_model)   # 400 / 404 raised here
    chat = call.chat_body()                                    # the chat request to run
    response = call.whole(chat_completion)                     # stream false
    async for data in call.events(chunk_batches): ...          # stream true: SSE bytes

A finished response is stored (``store``, default true) under ``scope`` for
``previous_response_id``, ``item_reference`` input items and ``GET /v1/responses/{id}``; a
failed one is not.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ember.models.api.chat_request import SERVER_MAX_STOP_STRINGS, ChatRequest, parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.api.responses_events import ResponseEvents, encode
from ember.models.api.responses_object import from_chat_completion, new_response_id
from ember.models.api.responses_request import parse_responses_request
from ember.models.api.responses_store import ResponseStore
from ember.models.constrain.automata import Automata


class ResponsesCall:
    def __init__(
        self,
        body: object,
        store: ResponseStore,
        scope: str,
        default_model: str,
        automata: Automata | None = None,
    ) -> None:
        """``automata``: the budget its schemas draw on (None: its own; a queued batch's items
        share one)."""
        request = parse_responses_request(body)
        items = tuple(_referenced(item, store, scope) for item in request.items)
        self.request = dataclasses.replace(request, items=items)
        self.store = store
        self.scope = scope
        history: list[Mapping[str, Any]] = []
        previous = self.request.previous_response_id
        if previous is not None:
            history = store.get(scope, previous, "previous_response_id").conversation()
        self.history = tuple(history)
        self.id = new_response_id()
        self.created_at = int(time.time())
        self.model = self.request.model or default_model
        self.chat = _checked(self.chat_body(), automata)

    def show_defaults(self, defaults: Mapping[str, Any]) -> None:
        """The response repeats the ``temperature`` / ``top_p`` it was sampled with: a server
        default (the checkpoint's, ``server/sampling_defaults.py``) where the request had none,
        as vLLM's response object shows its sampling parameters."""
        echo = dict(self.request.echo)
        for key in ("temperature", "top_p"):
            if key not in self.chat.sampling.given and key in defaults:
                echo[key] = defaults[key]
        self.request = dataclasses.replace(self.request, echo=echo)

    @property
    def stream(self) -> bool:
        return self.request.stream

    def chat_body(self) -> dict[str, Any]:
        return self.request.chat_body(self.history)

    def whole(self, completion: Mapping[str, Any]) -> dict[str, Any]:
        """The response for a whole ``chat.completion`` (stored when asked)."""
        response = from_chat_completion(
            completion,
            id=self.id,
            model=self.model,
            created_at=self.created_at,
            echo=self.request.echo,
            summary=self.request.summary,
        )
        self._keep(response)
        return response

    async def events(
        self, batches: AsyncIterator[Sequence[Mapping[str, Any]]]
    ) -> AsyncIterator[bytes]:
        """The SSE bytes for batches of chat chunks (one write per batch)."""
        events = ResponseEvents(
            self.id, self.model, self.created_at, self.request.echo, summary=self.request.summary
        )
        yield b"".join(encode(e) for e in events.start())
        try:
            async for batch in batches:
                out = [e for chunk in batch for e in events.feed(chunk)]
                if out:
                    yield b"".join(encode(e) for e in out)
                if events.done:
                    break
        finally:
            # Closed here, not left to the garbage collector: closing ends the generation.
            close = getattr(batches, "aclose", None)
            if close is not None:
                await close()
        tail = events.finish()
        if tail:
            yield b"".join(encode(e) for e in tail)
        if events.response is not None and events.response["status"] != "failed":
            self._keep(events.response)

    def _keep(self, response: Mapping[str, Any]) -> None:
        if self.request.store:
            self.store.put(self.scope, response, (*self.history, *self.request.items))


def _referenced(item: dict[str, Any], store: ResponseStore, scope: str) -> dict[str, Any]:
    """An ``item_reference`` as the stored item it names (so a stored conversation holds the
    items, not references to items that may be dropped first); other items as they are."""
    if item.get("type") != "item_reference":
        return item
    return dict(store.item(scope, item["id"]))


# Chat fields -> the Responses fields they came from, for errors the chat parser finds
# (messages have no one-to-one index: instructions add one, function calls join).
RENAMED = (
    (re.compile(r"^/messages(/.*)?$"), "/input"),
    (re.compile(r"^/max_tokens$"), "/max_output_tokens"),
    (re.compile(r"^/response_format(/json_schema)?"), "/text/format"),
    (re.compile(r"^/tool_choice/(function|allowed_tools)"), "/tool_choice"),
    (re.compile(r"^/tools/(\d+)/function"), r"/tools/\1"),
)


def _checked(body: Mapping[str, Any], automata: Automata | None) -> ChatRequest:
    """The chat request, validated as the model server validates it (no temperature cap: a
    gateway applies its own); an invalid field is named as the Responses request names it."""
    try:
        return parse_chat_request(
            body,
            dialect="openai",
            max_temperature=None,
            max_repetition_penalty=None,
            max_stop=SERVER_MAX_STOP_STRINGS,
            automata=automata,
        )
    except InvalidRequestField as exc:
        for pattern, name in RENAMED:
            field, count = pattern.subn(name, exc.field, count=1)
            if count:
                raise InvalidRequestField(field, exc.expected, exc.found, exc.code) from None
        raise
