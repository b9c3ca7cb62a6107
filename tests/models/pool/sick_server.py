"""A replica that misbehaves at the HTTP seam, for the pool's failure tests.

Its ``/health`` and ``/v1/models`` answer like a good replica's (so the pool keeps it in rotation);
its chat answers are sick, by ``mode``:

- ``hang``: reads the request and never answers (no status line, no headers);
- ``e500``: 500 with an OpenAI-style error body;
- ``garbage``: 200 with a body that is not JSON (``{not json at all``), or in a stream a
  ``data: {garbage`` event before ``data: [DONE]``;
- ``broken``: streams a first chunk, then an event shaped like a JSON object but broken inside
  (its usage's value is missing: the Workers dialect parses it), then ``[DONE]``;
- ``ok``: well after all (a test switches ``mode`` to see a replica recover): a one-word answer,
  after ``delay`` seconds (a healthy but slow replica).

It is a raw asyncio server (not starlette) so that it can send exactly the bytes a broken
server would, and it counts the chat connections it holds open: a test sees the pool hang up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

MODEL = "@cf/zai-org/glm-4.7-flash"


def _answer(status: int, body: bytes, ctype: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


@dataclass
class SickServer:
    """One sick replica: ``chats`` requests seen, ``open_chats`` connections held by a chat."""

    mode: str
    url: str = ""
    chats: int = 0
    open_chats: int = 0
    delay: float = 0.0  # how long an ``ok`` answer takes
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # invariant: asyncio runs each connection in a task
        self._handlers.add(task)
        in_chat = False
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                path = head[0].split()[1]
                fields = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in head[1:] if line)
                }
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                if path == "/health":
                    writer.write(_answer(200, b"{}"))
                elif path == "/v1/models":
                    listing = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                    writer.write(_answer(200, json.dumps(listing).encode()))
                else:
                    self.chats += 1
                    if not in_chat:
                        in_chat = True
                        self.open_chats += 1
                    if self.mode == "ok" and self.delay:
                        await asyncio.sleep(self.delay)
                    writer.write(self._chat(json.loads(body or b"{}").get("stream")))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if in_chat:
                self.open_chats -= 1
            writer.close()
            self._handlers.discard(task)

    async def stop(self, server: asyncio.Server) -> None:
        """Close the listener and every connection still open."""
        server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    def _chat(self, stream: object) -> bytes:
        if self.mode == "hang":
            return b""  # the read of the next request waits until the client hangs up
        if self.mode == "e500":
            return _answer(500, b'{"error": {"message": "internal boom from the sick replica"}}')
        if self.mode == "ok" and stream:
            delta = {"index": 0, "delta": {"content": "fine"}, "finish_reason": "stop"}
            chunk = json.dumps({"object": "chat.completion.chunk", "choices": [delta]}).encode()
            return _answer(200, b"data: " + chunk + b"\n\ndata: [DONE]\n\n", "text/event-stream")
        if self.mode == "ok":
            return _answer(200, json.dumps(_completion()).encode())
        if stream and self.mode == "broken":
            delta = {"index": 0, "delta": {"content": "fine"}, "finish_reason": None}
            first = json.dumps({"object": "chat.completion.chunk", "choices": [delta]}).encode()
            events = (
                b"data: "
                + first
                + b'\n\ndata: {"choices":[],"usage":{"prompt_tokens": }}\n\ndata: [DONE]\n\n'
            )
            return _answer(200, events, "text/event-stream")
        if stream:
            return _answer(200, b"data: {garbage\n\ndata: [DONE]\n\n", "text/event-stream")
        return _answer(200, b"{not json at all")


def _completion() -> dict:
    message = {"role": "assistant", "content": "fine"}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {"object": "chat.completion", "model": MODEL, "choices": [choice]}


@contextlib.contextmanager
def sick_server(mode: str) -> Iterator[SickServer]:
    """Run one SickServer on a 127.0.0.1 ephemeral port, in its own thread and loop."""
    sick = SickServer(mode)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sick.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    loop = asyncio.new_event_loop()
    started = threading.Event()
    server: list[asyncio.Server] = []

    async def serve() -> None:
        server.append(await asyncio.start_server(sick.handle, sock=sock))
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    try:
        yield sick
    finally:
        asyncio.run_coroutine_threadsafe(sick.stop(server[0]), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
