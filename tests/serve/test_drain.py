"""SIGTERM on ember serve: in-flight requests get ``drain_timeout_s`` to finish, and the log says
how many were draining and how many were cut when the time ran out."""

from __future__ import annotations

import signal
import threading

import httpx
import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account, put_worker

CONFIG = BASE_CONFIG + "ai:\n  pool: {drain_timeout_s: 1}\n"
# A response that starts and then never ends: only the drain deadline stops the server.
ENDLESS = """\
import asyncio
from workers import Response


async def on_fetch(request, env):
    async def body():
        yield b"started\\n"
        await asyncio.sleep(3600)

    return Response(body())
"""


def test_sigterm_drains_for_drain_timeout_s_then_closes_what_is_left(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    serve = ServeProcess(tmp_path_factory.mktemp("drain") / "state", CONFIG)
    try:
        account_id, token = permanent_account(serve, "drain")
        with serve.api(token) as api:
            assert put_worker(api, account_id, "endless", ENDLESS).status_code == 200
        started = threading.Event()
        ended: list[str] = []

        def listen() -> None:
            headers = {"host": "endless.drain.localhost"}
            try:
                with httpx.stream("GET", serve.url + "/", headers=headers, timeout=120) as reply:
                    for line in reply.iter_lines():
                        started.set()
                        ended.append(line)
            except httpx.HTTPError as exc:
                ended.append(type(exc).__name__)
            started.set()

        client = threading.Thread(target=listen, daemon=True)
        client.start()
        assert started.wait(60) and ended[:1] == ["started"], ended
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        # Bounded by drain_timeout_s (1 s); without a bound it would wait for the client's
        # 120 s read timeout. The 60 s here only keeps a regression from hanging the suite.
        serve.proc.wait(60)  # uvicorn re-raises the SIGTERM it handled: the code is -15
        client.join(60)
    finally:
        serve.stop()
    log = serve.output()
    assert "draining 1 request" in log, log[-2000:]
    assert "drain timed out after 1 s, closing 1 request" in log, log[-2000:]
    assert "Traceback" not in log, log[-2000:]
