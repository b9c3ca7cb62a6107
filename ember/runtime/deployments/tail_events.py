"""Live tail events: the typed event the runtime publishes, its ``trace-v1`` JSON, and the hub.

The runtime calls ``TailHub.publish(script_id, event)`` (from any thread) after each invocation;
every WebSocket subscribed to that script whose filters match gets the event as one text frame,
in wrangler's ``TailEventMessage`` shape (cloudflare-api.md §5.1). A slow subscriber's queue is
bounded: past it, events to that subscriber are dropped rather than stalling the worker.
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
            "truncated": False,
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


@dataclass
class _Subscriber:
    tail: Tail
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[dict[str, Any]]


class TailHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[_Subscriber]] = {}

    def subscribe(self, tail: Tail) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_LIMIT)
        with self._lock:
            self._subscribers.setdefault(tail.script_id, []).append(
                _Subscriber(tail, asyncio.get_running_loop(), queue)
            )
        return queue

    def unsubscribe(self, tail: Tail, queue: asyncio.Queue[dict[str, Any]]) -> None:
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
            sub.loop.call_soon_threadsafe(_force, sub.queue, CLOSED)
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
            sub.loop.call_soon_threadsafe(_force, sub.queue, CLOSED)
        return len(ended)

    def has_subscribers(self, script_id: str) -> bool:
        with self._lock:
            return bool(self._subscribers.get(script_id))

    def publish(self, script_id: str, event: TailEvent) -> int:
        """Deliver to every matching subscriber; returns how many got it. Thread-safe."""
        with self._lock:
            subscribers = list(self._subscribers.get(script_id, []))
        delivered = 0
        payload = event.to_trace_v1()
        for sub in subscribers:
            if matches(sub.tail.filters, event):
                sub.loop.call_soon_threadsafe(_offer, sub.queue, payload)
                delivered += 1
        return delivered


def _offer(queue: asyncio.Queue[dict[str, Any]], payload: dict[str, Any]) -> None:
    if not queue.full():
        queue.put_nowait(payload)


def _force(queue: asyncio.Queue[dict[str, Any]], payload: dict[str, Any]) -> None:
    while queue.full():
        queue.get_nowait()
    queue.put_nowait(payload)
