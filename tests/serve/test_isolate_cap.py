"""``platform.max_isolates`` caps the live isolates of all accounts together: at the cap a new
isolate replaces the least recently used idle one, and when every one is busy the request gets a
503 that says so (isolation.md §6.1); the operator's log names each."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.serve.conftest import BASE_CONFIG, ServeProcess, answer, permanent_account, put_worker

# One account fills the cap here: its share of it (test_isolate_share.py) is lifted.
CONFIG = BASE_CONFIG.replace(
    "platform:\n", "platform:\n  max_isolates: 2\n  accounts: {isolate_share: null}\n"
)
CONFIG += "ai:\n  pool: {drain_timeout_s: 1}\n"
# A response that starts and then never ends: its isolate stays busy while the client listens.
ENDLESS = """\
import asyncio
from workers import Response


async def on_fetch(request, env):
    async def body():
        yield b"started\\n"
        await asyncio.sleep(3600)

    return Response(body())
"""


def _deploy(serve: ServeProcess, account: str, workers: dict[str, str]) -> None:
    account_id, token = permanent_account(serve, account)
    with serve.api(token) as api:
        for name, source in workers.items():
            reply = put_worker(api, account_id, name, source)
            assert reply.status_code == 200, reply.text


def test_at_the_cap_the_least_recently_used_idle_isolate_makes_room(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG)
    try:
        assert "isolates: at most 2 live (platform.max_isolates)" in serve.output()
        _deploy(serve, "hoard", {f"w{i}": answer(f"w{i}") for i in range(3)})
        for name in ("w0", "w1", "w2", "w0"):
            reply = serve.worker("hoard", name)
            assert reply.status_code == 200 and reply.text.startswith(f"{name} "), reply.text
        log = serve.output()
        stopped = "isolate stopped: least recently used of 2 (platform.max_isolates)"
        assert f"w0.hoard: {stopped}" in log and f"w1.hoard: {stopped}" in log, log[-3000:]
    finally:
        serve.stop()


@contextmanager
def _busy(serve: ServeProcess, name: str) -> Iterator[None]:
    """A request to ``name`` in flight (its answer started) until the block ends."""
    started, done = threading.Event(), threading.Event()

    def listen() -> None:
        headers = {"host": f"{name}.busy.localhost"}
        try:
            with httpx.stream("GET", serve.url + "/", headers=headers, timeout=120) as reply:
                for _ in reply.iter_lines():
                    started.set()
                    done.wait(120)
                    return
        finally:
            started.set()

    client = threading.Thread(target=listen, daemon=True)
    client.start()
    assert started.wait(60)
    try:
        yield
    finally:
        done.set()
        client.join(60)


def test_when_every_isolate_is_busy_a_new_one_gets_a_503_that_says_why(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG)
    try:
        _deploy(serve, "busy", {"e1": ENDLESS, "e2": ENDLESS, "quick": answer("quick")})
        with _busy(serve, "e1"), _busy(serve, "e2"):
            refused = serve.worker("busy", "quick")
            assert refused.status_code == 503
            assert refused.text == (
                "Worker could not start: the platform is at its isolate limit.\n"
            )
        log = serve.output()
        assert (
            "quick.busy: not started: all 2 of the platform's isolates are busy "
            "(platform.max_isolates)"
        ) in log, log[-3000:]
        # The clients hung up: their isolates are idle again, and one makes room.
        deadline = time.monotonic() + 60
        while (reply := serve.worker("busy", "quick")).status_code == 503:
            assert time.monotonic() < deadline, reply.text
            time.sleep(0.1)
        assert reply.status_code == 200 and reply.text.startswith("quick "), reply.text
    finally:
        serve.stop()


SLOW = """\
import asyncio
from workers import Response


async def on_fetch(request, env):
    await asyncio.sleep(3)
    return Response("done")
"""


def test_a_burst_of_cold_requests_cannot_start_more_isolates_than_the_cap(
    tmp_path: Path,
) -> None:
    """Requests written at the same moment to eight cold workers: each new isolate is counted
    before the next request is read, so two start and the rest are refused while they work."""
    serve = ServeProcess(tmp_path / "state", CONFIG)
    try:
        _deploy(serve, "burst", {f"s{i}": SLOW for i in range(8)})
        host, port = serve.url.removeprefix("http://").split(":")

        async def burst() -> list[bytes]:
            opened = [await asyncio.open_connection(host, int(port)) for _ in range(8)]
            for index, (_, writer) in enumerate(opened):
                head = f"GET / HTTP/1.1\r\nHost: s{index}.burst.localhost\r\nConnection: close"
                writer.write(f"{head}\r\n\r\n".encode())
            await asyncio.gather(*(writer.drain() for _, writer in opened))
            return [(await reader.read()).split(b"\r\n", 1)[0] for reader, _ in opened]

        statuses = asyncio.run(burst())
        assert statuses.count(b"HTTP/1.1 200 OK") == 2, statuses
        assert statuses.count(b"HTTP/1.1 503 Service Unavailable") == 6, statuses
    finally:
        serve.stop()
