"""A Responses API request answered over a chat-completions call, for every front of the
gateway: ``/ai/v1/responses`` (``responses_front``) and ``env.AI.run`` / REST ``ai/run`` on an
id that answers in the Responses schema (gpt-oss: ``model_schema``).

    answer = await responses_answer(call, lambda body: gateway.chat(tenant, body, options))
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ember.bindings.ai.answer import AIAnswer
from ember.models.api.responses_call import ResponsesCall

Chat = Callable[[dict[str, Any]], Awaitable[AIAnswer]]


async def responses_answer(call: ResponsesCall, chat: Chat) -> AIAnswer:
    """The Responses object (or its event stream) for ``call``, run through ``chat``."""
    answer = await chat(call.chat_body())
    if answer.stream is None:
        content = json.dumps(call.whole(answer.json())).encode("utf-8")
        return AIAnswer(answer.request_id, 200, answer.headers, content)
    events = call.events(chat_chunks(answer.stream))
    return AIAnswer(answer.request_id, 200, answer.headers, stream=Closing(events, answer.stream))


async def chat_chunks(stream: AsyncIterator[bytes]) -> AsyncIterator[list[dict[str, Any]]]:
    """An OpenAI chat SSE byte stream -> its chunk objects, one list per read (``[DONE]``
    and anything that is not a JSON object left out)."""
    pending = b""
    async for data in stream:
        pending += data
        blocks = pending.split(b"\n\n")
        pending = blocks.pop()
        batch = []
        for block in blocks:
            lines = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
            text = b"\n".join(lines)
            if not text or text == b"[DONE]":
                continue
            try:
                payload = json.loads(text)
            except ValueError:
                continue
            if isinstance(payload, dict):
                batch.append(payload)
        if batch:
            yield batch


class Closing:
    """The response's events; ``aclose`` also closes the gateway's stream, even when the events
    were never read (a generator that never started runs no ``finally``), so the replica stops
    and the slot and quota come back."""

    def __init__(self, events: AsyncIterator[bytes], upstream: AsyncIterator[bytes]) -> None:
        self._events = events
        self._upstream = upstream

    def __aiter__(self) -> Closing:
        return self

    async def __anext__(self) -> bytes:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        try:
            await self._events.aclose()  # type: ignore[attr-defined]
        finally:
            await self._upstream.aclose()  # type: ignore[attr-defined]
