"""Request ids whose client left while their request is still in the engine (``AsyncEngine``).

A request whose stream closed before its end is aborted, but it stays in the engine until the
engine thread's next step collects it (``LLMEngine.holds``). Its id stays taken meanwhile: a new
request under the same id (SGLang's ``rid``, a client's retry) waits for it to go, or it would
collide with the ended one in the engine, receive its last output, or share per-id state with it
(the server keeps grammars by id). An abort of the id while the new one waits (``/abort_request``,
``abort_all``) is kept for it: it was not in the engine yet, so the engine's abort missed it.

Thread-safe: the event loop calls ``leave`` and ``wait``, the engine thread ``release``, any
thread ``mark_aborted``. Its own lock is only ever taken inside the engine's, never around it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Literal

DRAIN_WAIT_S = 10.0  # for a left request under one's id to go: a step (a long prefill's)

Drain = Literal["free", "aborted", "busy"]


class _Waiter:
    """One request waiting for an id to drain; ``aborted`` once an abort of the id came."""

    __slots__ = ("aborted",)

    def __init__(self) -> None:
        self.aborted = False


class DrainingIds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._draining: set[str] = set()
        # id -> one flag per request waiting for it to drain, set when an abort of the id came
        # while that request waited (not one that starts waiting later: review25)
        self._waiting: dict[str, list[_Waiter]] = {}

    def leave(self, request_id: str) -> None:
        """The request's stream closed before its end: its id drains."""
        with self._lock:
            self._draining.add(request_id)

    def release(self, request_id: str) -> None:
        """The engine let the request go (or never had it): the id is free."""
        with self._lock:
            self._draining.discard(request_id)

    def __contains__(self, request_id: object) -> bool:
        with self._lock:
            return request_id in self._draining

    def mark_aborted(self, request_ids: list[str] | None = None) -> None:
        """An abort of these ids (None: every id) reaches the requests waiting for them."""
        with self._lock:
            ids = list(self._waiting) if request_ids is None else request_ids
            for request_id in ids:
                for waiter in self._waiting.get(request_id, ()):
                    waiter.aborted = True

    async def wait(
        self, request_id: str, stopped: Callable[[], bool], limit_s: float = DRAIN_WAIT_S
    ) -> Drain:
        """Wait while ``request_id`` drains (at most ``limit_s``, or until ``stopped()``):
        "free", "aborted" (an abort of the id came meanwhile) or "busy" (it still drains)."""
        deadline = time.monotonic() + limit_s
        pause = 0.001
        me = _Waiter()
        with self._lock:
            if request_id not in self._draining:
                return "free"  # the usual case: no wait, and no await (nothing else runs)
            self._waiting.setdefault(request_id, []).append(me)
        try:
            while True:
                with self._lock:
                    if me.aborted:
                        return "aborted"
                    if request_id not in self._draining:
                        return "free"
                if stopped():
                    return "free"  # the engine's failure answers the request
                if time.monotonic() >= deadline:
                    return "busy"
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.02)
        finally:
            with self._lock:
                waiters = self._waiting[request_id]
                waiters.remove(me)  # by identity: a waiter compares equal only to itself
                if not waiters:
                    del self._waiting[request_id]
