"""The Responses API on the runtime's AI routes (``/ai/v1/responses``, and under
``/client/v4/accounts/{account}/ai/v1``): a Responses request becomes a chat request that goes
through ``AIGateway.chat`` like any other (model ids, quotas, ``options``, session affinity,
busy 429s, the response cache), and its answer is translated back here, so every replica that
speaks OpenAI chat (ember's model server, SGLang) serves it. Stored responses are the gateway's,
one scope per tenant.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ember.bindings.ai.gateway import AIAnswer, AIGateway
from ember.bindings.ai.options import RunOptions
from ember.models.api.responses_call import ResponsesCall


async def create_response(
    gateway: AIGateway, tenant: str, body: Mapping[str, Any], options: RunOptions
) -> AIAnswer:
    """One ``POST .../ai/v1/responses``; raises what ``AIGateway.chat`` raises, plus
    ``InvalidRequestField`` and ``ResponseNotFound``."""
    # The route checked the model first (require_model), as the chat route does.
    call = ResponsesCall(body, gateway.responses, tenant, str(body.get("model") or ""))
    answer = await gateway.chat(tenant, call.chat_body(), options)
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
