"""What the AI gateway hands its fronts: an ``AIAnswer`` (JSON bytes or a byte stream, with the
``cf-ai-req-id`` and cache headers) or an ``AIRequestFailed`` carrying the Workers AI code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ember.bindings.ai.failures import Failure
from ember.errors import BindingError
from ember.models.api.sse import CONTENT_TYPE as SSE_CONTENT_TYPE

JSON_CONTENT_TYPE = "application/json"


class AIRequestFailed(BindingError):
    """An AI request failed; ``failure`` says with which Workers AI code."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        self.counted = False  # already in the gateway's metrics and log (run, require_model)
        super().__init__(failure.message)


@dataclass(slots=True)
class AIAnswer:
    """A successful answer: JSON bytes (``body``) or a byte stream (``stream``)."""

    request_id: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    stream: AsyncIterator[bytes] | None = None

    def json(self) -> Any:
        assert self.body is not None  # invariant: a JSON answer
        return json.loads(self.body)


def answer_headers(request_id: str, stream: bool, key: str | None) -> dict[str, str]:
    """Content type and request id; ``cf-aig-cache-status: MISS`` when the gateway caches it."""
    headers = {
        "content-type": SSE_CONTENT_TYPE if stream else JSON_CONTENT_TYPE,
        "cf-ai-req-id": request_id,
    }
    if key is not None:
        headers["cf-aig-cache-status"] = "MISS"
    return headers


def cached_answer(request_id: str, stream: bool, content: bytes) -> AIAnswer:
    """A cache hit, replayed as it was first answered (one chunk when it was a stream)."""
    headers = answer_headers(request_id, stream, None)
    headers["cf-aig-cache-status"] = "HIT"
    if not stream:
        return AIAnswer(request_id, 200, headers, content)

    async def replay() -> AsyncIterator[bytes]:
        yield content

    return AIAnswer(request_id, 200, headers, stream=replay())
