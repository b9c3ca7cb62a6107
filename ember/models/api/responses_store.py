"""A bounded in-memory store of finished responses: ``GET /v1/responses/{id}`` and
``previous_response_id`` read it.

OpenAI stores responses by default (``store`` true) and so does ember; vLLM ignores ``store``
unless ``VLLM_ENABLE_RESPONSES_API_STORE`` is set, and then keeps every response forever. Here
the oldest responses are dropped once ``max_responses`` are held or their JSON passes
``max_bytes``; a dropped or unknown id is a 404 naming it. Each entry keeps the whole
conversation that led to it (earlier input items and outputs), so a chain keeps working while
its last response is held, whatever happened to the ones before. ``scope`` separates tenants:
one tenant's response ids mean nothing to another's.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ember.errors import NotFound
from ember.models.api.errors import InvalidRequestField

MAX_RESPONSES = 1024
MAX_BYTES = 64 * 2**20


class ResponseNotFound(NotFound):
    """No stored response has this id (never stored, ``store`` false, or dropped since).
    ``param``: the request field that named it (None for ``GET /v1/responses/{id}``)."""

    def __init__(self, response_id: str, param: str | None = None) -> None:
        self.response_id = response_id
        self.param = param
        what = "Previous response" if param else "Response"
        super().__init__(
            f"{what} with id '{response_id}' not found (ember keeps the last "
            f"{MAX_RESPONSES} stored responses in memory, until the server restarts)."
        )

    def openai_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": str(self),
                "type": "invalid_request_error",
                "param": self.param,
                "code": "response_not_found",
            }
        }


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response: Mapping[str, Any]
    items: tuple[Mapping[str, Any], ...]  # the input items of the whole conversation so far
    size: int

    def conversation(self) -> list[Mapping[str, Any]]:
        """What a follow-up continues from: the inputs, then this response's output."""
        return [*self.items, *self.response.get("output", ())]


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_bytes: int = MAX_BYTES) -> None:
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], StoredResponse] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, scope: str, response: Mapping[str, Any], items: tuple[Mapping, ...]) -> None:
        size = len(json.dumps([response, items], ensure_ascii=False))
        key = (scope, str(response["id"]))
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[key] = StoredResponse(response, items, size)
        self._bytes += size
        while self._entries and (
            len(self._entries) > self.max_responses or self._bytes > self.max_bytes
        ):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size

    def delete(self, scope: str, response_id: str) -> None:
        """``DELETE /v1/responses/{id}``; an unknown id raises ``ResponseNotFound``."""
        entry = self._entries.pop((scope, response_id), None)
        if entry is None:
            raise ResponseNotFound(response_id)
        self._bytes -= entry.size

    def get(self, scope: str, response_id: str, param: str | None = None) -> StoredResponse:
        entry = self._entries.get((scope, response_id))
        if entry is None:
            raise ResponseNotFound(response_id, param)
        self._entries.move_to_end((scope, response_id))  # in use: dropped last
        return entry


def deleted(response_id: str) -> dict[str, Any]:
    """The answer to a delete (OpenAI's shape for deleted objects)."""
    return {"id": response_id, "object": "response.deleted", "deleted": True}


def check_retrieve(query: Mapping[str, str]) -> None:
    """``GET /v1/responses/{id}`` parameters: ``stream`` (replaying a stored stream) is not
    served; a stored response comes back whole."""
    if query.get("stream", "false").lower() not in ("false", "0", ""):
        raise InvalidRequestField(
            "/stream",
            "false (ember returns stored responses whole; it does not replay their events)",
            repr(query["stream"]),
            "unsupported_value",
        )
