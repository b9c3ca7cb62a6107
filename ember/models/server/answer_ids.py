"""The engine request ids behind an answer's ``id``, so that ``/abort_request`` finds a request
by the id its client was given.

An answer's id is the engine's request id unless the caller sent ``x-request-id`` (vLLM's
``chatcmpl-<x-request-id>``, ``caller_id.answer_id``); the engine's id then stays ember's own,
since callers may send the same header twice. SGLang answers with the engine's id (its
``meta_info.id``) and aborts by it, so a client that aborts by the id it was streamed expects
that to work. The ids are registered while their requests are in the engine (each choice of
``n``), under the answer id; every request under it is aborted, as SGLang aborts every child of
a parent rid.

Who can abort is unchanged: ``/abort_request`` has always taken ``abort_all`` from any caller
that reaches it (SGLang's is unauthenticated beyond the server's API key too). The AI gateway
sends its own random 128-bit id as ``x-request-id`` (dropping a tenant's) and does not forward
``/abort_request``, so a tenant can neither guess nor send one.

Event-loop only: routes register and release, ``/abort_request`` looks up.
"""

from __future__ import annotations


class AnswerIds:
    def __init__(self) -> None:
        self._ids: dict[str, list[str]] = {}

    def add(self, answer_id: str, request_id: str) -> None:
        self._ids.setdefault(answer_id, []).append(request_id)

    def release(self, answer_id: str, request_id: str) -> None:
        held = self._ids.get(answer_id)
        if held is None or request_id not in held:
            return
        held.remove(request_id)
        if not held:
            del self._ids[answer_id]

    def requests(self, answer_id: str) -> list[str]:
        """The engine ids of the requests in progress that answer under ``answer_id``."""
        return list(self._ids.get(answer_id, ()))

    def __len__(self) -> int:
        return sum(len(ids) for ids in self._ids.values())
