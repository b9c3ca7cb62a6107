"""A stand-in replica for ``bench/ai_start.py``: answers every chat request at once, and says when
each one arrived.

    python -m bench.ai_stub --port 8123

It speaks the part of the model server's protocol the pool uses (``/health``, ``/v1/models``,
streaming ``/v1/chat/completions`` with chunked SSE) and answers each stream with one token,
the usage and ``[DONE]``, without any model. What is left in a client's time to first token is
then only the path in front of the replica. ``GET /arrivals`` returns (and forgets) the
``CLOCK_MONOTONIC`` time at which each request's body was complete, keyed by its ``user``
field, so a client on the same machine can tell when each request of a burst got here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time

MODEL = "stub"


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: dict) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def _answer(model: str) -> bytes:
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": model}
    first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "x"}}]}
    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    usage = {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    return (
        head
        + _event(first)
        + _event(last)
        + _event({**base, "choices": [], "usage": usage})
        + _chunk(b"data: [DONE]\n\n")
        + b"0\r\n\r\n"
    )


def _json(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


class Stub:
    def __init__(self, model: str) -> None:
        self.model = model
        self.arrivals: dict[str, float] = {}
        self.stream = _answer(model)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                arrived = time.monotonic()
                if path == "/v1/chat/completions":
                    request = json.loads(body)
                    self.arrivals[str(request.get("user"))] = arrived
                    writer.write(self.stream)
                elif path == "/v1/models":
                    writer.write(_json({"object": "list", "data": [{"id": self.model}]}))
                elif path == "/arrivals":
                    arrivals, self.arrivals = self.arrivals, {}
                    writer.write(_json(arrivals))
                else:
                    writer.write(_json({"status": "ok"}))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def main(port: int, model: str) -> None:
    stub = Stub(model)
    server = await asyncio.start_server(stub.serve, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default=MODEL)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):  # the benchmark stops it with SIGINT
        asyncio.run(main(args.port, args.model))
