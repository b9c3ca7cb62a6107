"""Live tail events: the typed event the runtime publishes, its ``trace-v1`` JSON, and the hub.

The runtime calls ``TailHub.publish(script_id, event)`` (from any thread) after each invocation;
every WebSocket subscribed to that script whose filters match gets the event as one text frame,
in wrangler's ``TailEventMessage`` shape (cloudflare-api.md §5.1). A slow subscriber's queue is
bounded in events and bytes, and a worker has at most ``MAX_SOCKETS_PER_SCRIPT`` sockets: past
them, events to that subscriber are dropped rather than stalling the worker or filling memory.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ember.runtime.deployments.records import Tail

QUEUE_LIMIT = 1000
# What one socket's unsent events may hold (see TailQueue), and how many sockets may tail one
# worker at once: together they bound the memory a tenant's unread tails can pin.
QUEUE_BYTES = 16 * 1024 * 1024
MAX_SOCKETS_PER_SCRIPT = 10
# Put on a subscriber's queue when its worker is gone: the WebSocket closes.
CLOSED: dict[str, Any] = {"__closed__": True}


@dataclass(frozen=True)
class TailLog:
    level: str
    message: tuple[Any, ...]
    timestamp_ms: int


@dataclass(frozen=True)
class TailException:
    name: str
    message: str
    timestamp_ms: int
    stack: str | None = None


@dataclass(frozen=True)
class TailEvent:
    script_name: str
    outcome: str  # ok | exception | exceededCpu | exceededMemory | canceled | unknown
    event_timestamp_ms: int
    version_id: str | None = None
    url: str | None = None
    method: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    cron: str | None = None
    scheduled_time_ms: int | None = None
    logs: tuple[TailLog, ...] = ()
    exceptions: tuple[TailException, ...] = ()
    wall_time_ms: int = 0
    cpu_time_ms: int = 0
    truncated: bool = False  # the invocation logged more than the runtime keeps for a tail

    def to_trace_v1(self) -> dict[str, Any]:
        if self.cron is not None:
            event: dict[str, Any] = {
                "cron": self.cron,
                "scheduledTime": self.scheduled_time_ms or 0,
            }
        else:
            event = {
                "request": {
                    "url": self.url or "",
                    "method": self.method or "GET",
                    "headers": dict(self.headers),
                    "cf": {},
                }
            }
            if self.status is not None:
                event["response"] = {"status": self.status}
        return {
            "outcome": self.outcome,
            "scriptName": self.script_name,
            "scriptVersion": {"id": self.version_id} if self.version_id else None,
            "exceptions": [
                {
                    "name": e.name,
                    "message": e.message,
                    "timestamp": e.timestamp_ms,
                    **({"stack": e.stack} if e.stack else {}),
                }
                for e in self.exceptions
            ],
            "logs": [
                {
                    "message": list(entry.message),
                    "level": entry.level,
                    "timestamp": entry.timestamp_ms,
                }
                for entry in self.logs
            ],
            "eventTimestamp": self.event_timestamp_ms,
            "event": event,
            "wallTime": self.wall_time_ms,
            "cpuTime": self.cpu_time_ms,
            "truncated": self.truncated,
            "executionModel": "stateless",
            "diagnosticsChannelEvents": [],
        }


def matches(filters: tuple[dict[str, Any], ...], event: TailEvent) -> bool:
    """wrangler's tail filters (``src/tail/filters.ts``) applied on our side."""
    for f in filters:
        if "sampling_rate" in f and random.random() >= float(f["sampling_rate"]):
            return False
        if "outcome" in f and event.outcome not in f["outcome"]:
            return False
        if "method" in f and (event.method or "") not in f["method"]:
            return False
        if "header" in f:
            value = {k.lower(): v for k, v in event.headers.items()}.get(
                str(f["header"].get("key", "")).lower()
            )
            query = f["header"].get("query")
            if value is None or (query is not None and query not in value):
                return False
        if "client_ip" in f:
            ip = event.headers.get("cf-connecting-ip", "")
            if "self" not in f["client_ip"] and ip not in f["client_ip"]:
                return False
        if "query" in f:
            text = json.dumps(
                [[entry.message for entry in event.logs], [e.message for e in event.exceptions]]
            )
            if str(f["query"]) not in text:
                return False
        if "scriptVersion" in f and event.version_id != f["scriptVersion"]:
            return False
    return True


class TooManyTails(Exception):
    """A worker already has ``MAX_SOCKETS_PER_SCRIPT`` tail sockets open."""


class TailQueue:
    """One subscriber's pending events as JSON text, bounded in count and in bytes.

    Events are serialized once per publish and shared by every subscriber; what a subscriber
    that never reads can pin in the supervisor's memory is at most ``QUEUE_BYTES``. Past either
    bound new events to it are dropped. Only its event loop's thread touches it.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | dict[str, Any]] = asyncio.Queue(QUEUE_LIMIT)
        self.queued_bytes = 0

    def offer(self, text: str) -> None:
        if self._queue.full() or self.queued_bytes + len(text) > QUEUE_BYTES:
            return
        self._queue.put_nowait(text)
        self.queued_bytes += len(text)

    def end(self) -> None:
        """Drop what is pending and queue ``CLOSED``: the socket closes next."""
        while not self._queue.empty():
            self._queue.get_nowait()
        self.queued_bytes = 0
        self._queue.put_nowait(CLOSED)

    async def get(self) -> str | dict[str, Any]:
        """The next event's JSON text, or ``CLOSED``."""
        item = await self._queue.get()
        if isinstance(item, str):
            self.queued_bytes -= len(item)
        return item


@dataclass
class _Subscriber:
    tail: Tail
    loop: asyncio.AbstractEventLoop
    queue: TailQueue


class TailHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[_Subscriber]] = {}

    def subscribe(self, tail: Tail) -> TailQueue:
        """A queue of the worker's events for one socket, or ``TooManyTails``."""
        queue = TailQueue()
        with self._lock:
            subscribers = self._subscribers.setdefault(tail.script_id, [])
            if len(subscribers) >= MAX_SOCKETS_PER_SCRIPT:
                raise TooManyTails(tail.script_id)
            subscribers.append(_Subscriber(tail, asyncio.get_running_loop(), queue))
        return queue

    def unsubscribe(self, tail: Tail, queue: TailQueue) -> None:
        with self._lock:
            remaining = [
                s for s in self._subscribers.get(tail.script_id, []) if s.queue is not queue
            ]
            if remaining:
                self._subscribers[tail.script_id] = remaining
            else:
                self._subscribers.pop(tail.script_id, None)

    def close_script(self, script_id: str) -> int:
        """End every tail of a worker (it was deleted); returns how many were open."""
        with self._lock:
            subscribers = self._subscribers.pop(script_id, [])
        for sub in subscribers:
            sub.loop.call_soon_threadsafe(sub.queue.end)
        return len(subscribers)

    def close_tails(self, tail_ids: Collection[str]) -> int:
        """End the open WebSockets of these tail sessions (deleted, or revoked by a claim)."""
        wanted = set(tail_ids)
        ended: list[_Subscriber] = []
        with self._lock:
            for script_id, subscribers in list(self._subscribers.items()):
                kept = [s for s in subscribers if s.tail.id not in wanted]
                ended += [s for s in subscribers if s.tail.id in wanted]
                if kept:
                    self._subscribers[script_id] = kept
                else:
                    del self._subscribers[script_id]
        for sub in ended:
            sub.loop.call_soon_threadsafe(sub.queue.end)
        return len(ended)

    def has_subscribers(self, script_id: str) -> bool:
        with self._lock:
            return bool(self._subscribers.get(script_id))

    def publish(self, script_id: str, event: TailEvent) -> int:
        """Deliver to every matching subscriber; returns how many got it. Thread-safe."""
        with self._lock:
            subscribers = list(self._subscribers.get(script_id, []))
        delivered = 0
        text = json.dumps(event.to_trace_v1())
        for sub in subscribers:
            if matches(sub.tail.filters, event):
                sub.loop.call_soon_threadsafe(sub.queue.offer, text)
                delivered += 1
        return delivered
