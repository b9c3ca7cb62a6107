"""A bounded in-memory store of finished responses: ``GET /v1/responses/{id}`` and
``previous_response_id`` read it.

OpenAI stores responses by default (``store`` true) and so does ember; vLLM ignores ``store``
unless ``VLLM_ENABLE_RESPONSES_API_STORE`` is set, and then keeps every response forever. Here
a scope's oldest responses are dropped once it holds ``max_responses`` or their JSON passes
``max_bytes``; a dropped or unknown id is a 404 naming it. The items a stored response produced
can be sent back by id (``{"type": "item_reference", "id"}``, ``item``), as OpenAI's are. Each
entry keeps the whole conversation that led to it (earlier input items and outputs), so a chain
keeps working while its last response is held, whatever happened to the ones before. ``scope``
separates tenants: one tenant's response ids mean nothing to another's, and its traffic cannot
push another's responses out: the bounds are per scope, and past ``max_total_bytes`` for all of
them the scope holding the most bytes gives up its oldest.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ember.errors import NotFound
from ember.models.api.errors import InvalidRequestField

MAX_RESPONSES = 1024  # per scope
MAX_BYTES = 64 * 2**20  # per scope
MAX_TOTAL_BYTES = 256 * 2**20  # every scope together


class ResponseNotFound(NotFound):
    """No stored response has this id (never stored, ``store`` false, or dropped since).
    ``param``: the request field that named it (None for ``GET /v1/responses/{id}``)."""

    code: str | None = "response_not_found"

    def __init__(self, response_id: str, param: str | None = None) -> None:
        self.response_id = response_id
        self.param = param
        what = "Previous response" if param else "Response"
        super().__init__(
            f"{what} with id '{response_id}' not found (ember keeps the last "
            f"{MAX_RESPONSES} stored responses of each tenant in memory, until the server "
            "restarts)."
        )

    def openai_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": str(self),
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }


class ItemNotFound(ResponseNotFound):
    """An ``item_reference`` names no item of a stored response (a ``ResponseNotFound``, so
    every route answers it with the same 404). OpenAI's words, then how long ember keeps them."""

    code = None  # OpenAI's answer has none

    def __init__(self, item_id: str) -> None:
        self.response_id = item_id
        self.param = "input"
        NotFound.__init__(
            self,
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or remove this item from your input "
            f"(ember keeps the output items of the last {MAX_RESPONSES} stored responses of "
            "each tenant in memory, until the server restarts).",
        )


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response: Mapping[str, Any]
    items: tuple[Mapping[str, Any], ...]  # the input items of the whole conversation so far
    size: int

    def conversation(self) -> list[Mapping[str, Any]]:
        """What a follow-up continues from: the inputs, then this response's output."""
        return [*self.items, *self.response.get("output", ())]


class ResponseStore:
    def __init__(
        self,
        max_responses: int = MAX_RESPONSES,
        max_bytes: int = MAX_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
    ) -> None:
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self.max_total_bytes = max_total_bytes
        self._scopes: dict[str, OrderedDict[str, StoredResponse]] = {}
        self._bytes: dict[str, int] = {}
        # A request whose schemas take long to compile is taken in on a worker thread, reading
        # this store (previous_response_id, item references) while the event loop stores
        # finished responses: ``item`` iterates a scope that ``put`` may change.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._scopes.values())

    def put(self, scope: str, response: Mapping[str, Any], items: tuple[Mapping, ...]) -> None:
        size = len(json.dumps([response, items], ensure_ascii=False))
        with self._lock:
            self._put(scope, response, items, size)

    def _put(
        self, scope: str, response: Mapping[str, Any], items: tuple[Mapping, ...], size: int
    ) -> None:
        entries = self._scopes.setdefault(scope, OrderedDict())
        response_id = str(response["id"])
        self._forget(scope, response_id)
        entries[response_id] = StoredResponse(response, items, size)
        self._bytes[scope] = self._bytes.get(scope, 0) + size
        while entries and (
            len(entries) > self.max_responses or self._bytes[scope] > self.max_bytes
        ):
            self._drop_oldest(scope)
        while sum(self._bytes.values()) > self.max_total_bytes:
            self._drop_oldest(max(self._bytes, key=self._bytes.__getitem__))

    def delete(self, scope: str, response_id: str) -> None:
        """``DELETE /v1/responses/{id}``; an unknown id raises ``ResponseNotFound``."""
        with self._lock:
            if not self._forget(scope, response_id):
                raise ResponseNotFound(response_id)

    def get(self, scope: str, response_id: str, param: str | None = None) -> StoredResponse:
        with self._lock:
            entries = self._scopes.get(scope)
            entry = entries.get(response_id) if entries is not None else None
            if entries is None or entry is None:
                raise ResponseNotFound(response_id, param)
            entries.move_to_end(response_id)  # in use: dropped last
            return entry

    def item(self, scope: str, item_id: str) -> Mapping[str, Any]:
        """The output item ``item_id`` of one of ``scope``'s stored responses (newest first:
        a scope holds at most ``max_responses``, each a few items)."""
        with self._lock:
            entries = self._scopes.get(scope, OrderedDict())
            for response_id, entry in reversed(entries.items()):
                for item in entry.response.get("output", ()):
                    if item.get("id") == item_id:
                        entries.move_to_end(response_id)  # in use: dropped last
                        return item
        raise ItemNotFound(item_id)

    def _forget(self, scope: str, response_id: str) -> bool:
        entries = self._scopes.get(scope)
        entry = entries.pop(response_id, None) if entries is not None else None
        if entry is None:
            return False
        self._bytes[scope] -= entry.size
        self._tidy(scope)
        return True

    def _drop_oldest(self, scope: str) -> None:
        entries = self._scopes[scope]
        _, dropped = entries.popitem(last=False)
        self._bytes[scope] -= dropped.size
        self._tidy(scope)

    def _tidy(self, scope: str) -> None:
        if not self._scopes.get(scope):
            self._scopes.pop(scope, None)
            self._bytes.pop(scope, None)


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
