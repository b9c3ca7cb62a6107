"""The worker of the sync-HTTP hard-case tests (``test_sync_http_hard.py``).

Routes: ``burn`` (CPU between blocking calls until the CPU limit stops it), ``lines`` (a
streamed response of numbered lines that goes on until ``burn`` has stopped), ``busy`` (fills
the isolate's socket, then makes a blocking call), ``never`` (a blocking call that is never
answered), ``trickle`` (a streamed reply whose body stops after its first chunk) and
``streams`` (the isolate's open stream and pending call counts).
"""

from __future__ import annotations

LINE_BYTES = 64


def line(i: int) -> bytes:
    """Line ``i`` of the ``lines`` route (every line the same length, so a cut shows)."""
    return f"{i:08d}".encode().ljust(LINE_BYTES - 1, b".") + b"\n"


WORKER = """
import asyncio
import json
import time

import requests
from workers import Response

from ember.runtime.isolate.scope import current_scope

STOPPED = []  # set when the burning request ended (the CPU limit stopped it)


def line(i):
    return f"{i:08d}".encode().ljust(63, b".") + b"\\n"


async def on_fetch(request, env):
    up = request.headers.get("x-upstream")
    route = request.url.split("/", 3)[3]
    if route == "burn":
        STOPPED.clear()
        requests.get(up + "/status/201")  # the test's sign that this request runs
        try:
            while True:
                end = time.process_time() + 0.002
                while time.process_time() < end:
                    pass
                requests.get(up + "/echo")
                await asyncio.sleep(0)  # the streaming request queues its next lines
        finally:
            STOPPED.append(True)
    if route == "lines":
        async def lines():
            i = after = 0
            while after < 50 and i < 200_000:
                yield line(i)
                i += 1
                after += bool(STOPPED)
                await asyncio.sleep(0)
        return Response(lines())
    if route == "busy":
        for i in range(300):  # about 18 MB of log frames: more than the socket holds
            print(f"busy {i:03d} " + "x" * 60_000)
        for _ in range(3):
            await asyncio.sleep(0)  # the writer flushes what the socket takes
        try:
            answered = requests.get(up + "/echo?n=busy").json()["query"]["n"]
        except requests.ConnectionError as exc:
            return Response(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        return Response(json.dumps({"error": None, "answered": answered}))
    if route == "never":
        requests.get(up + "/never")  # no timeout: only a cancel of this request ends it
        return Response("answered")
    if route == "trickle":
        r = requests.get(up + "/trickle", stream=True)
        return Response(b"".join(r.iter_content(chunk_size=None)))  # the rest never comes
    if route == "streams":
        channel = current_scope().channel
        out, incoming = channel._mux.open_counts()
        return Response(json.dumps({"out": out, "in": incoming, "calls": len(channel._pending)}))
    if route == "ok":
        return Response(requests.get(up + "/echo?n=ok").json()["query"]["n"])
    return Response("no such route", status=404)
"""
