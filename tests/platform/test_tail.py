"""Tail sessions and the trace-v1 WebSocket (events published through the hub, as the runtime
will after each invocation)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets

from ember.runtime.deployments.tail_events import TailEvent, TailLog, matches
from tests.platform.conftest import RunningPlatform, worker_upload


def _deploy(platform: RunningPlatform) -> tuple[str, httpx.Client]:
    account, issued = platform.plane.accounts.create_permanent("acme")
    client = platform.client(issued.token)
    body, content_type = worker_upload()
    client.put(
        f"/accounts/{account.id}/workers/scripts/hello",
        content=body,
        headers={"content-type": content_type},
    ).raise_for_status()
    return account.id, client


def test_tail_websocket_delivers_matching_events(platform: RunningPlatform) -> None:
    account_id, client = _deploy(platform)
    created = client.post(
        f"/accounts/{account_id}/workers/scripts/hello/tails",
        content=json.dumps({"filters": [{"method": ["GET"]}]}),
        headers={"content-type": "text/plain;charset=UTF-8"},
    ).json()["result"]
    assert created["url"].startswith(platform.url.replace("http://", "ws://") + "/client/v4/")
    script_id = platform.plane.scripts.get(platform.plane.accounts.get(account_id), "hello").id

    async def scenario() -> list[dict[str, object]]:
        async with websockets.connect(created["url"], subprotocols=["trace-v1"]) as socket:
            assert socket.subprotocol == "trace-v1"
            await socket.send(json.dumps({"debug": False}))
            app_hub = platform.hub
            deadline = time.monotonic() + 5
            while not app_hub.has_subscribers(script_id) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            now = int(time.time() * 1000)
            app_hub.publish(
                script_id, TailEvent("hello", "ok", now, method="POST", url="/x", status=200)
            )  # filtered out
            app_hub.publish(
                script_id,
                TailEvent(
                    "hello",
                    "ok",
                    now,
                    method="GET",
                    url="/y",
                    status=201,
                    logs=(TailLog("log", ("hi",), now),),
                ),
            )
            return [json.loads(await asyncio.wait_for(socket.recv(), 5))]

    events = asyncio.run(scenario())
    assert events[0]["event"] == {
        "request": {"url": "/y", "method": "GET", "headers": {}, "cf": {}},
        "response": {"status": 201},
    }
    assert events[0]["logs"][0]["message"] == ["hi"] and events[0]["scriptName"] == "hello"
    deleted = client.delete(f"/accounts/{account_id}/workers/scripts/hello/tails/{created['id']}")
    assert deleted.status_code == 200


def test_unknown_tail_socket_is_refused(platform: RunningPlatform) -> None:
    async def scenario() -> None:
        url = platform.url.replace("http://", "ws://") + "/client/v4/tail-ws/" + "0" * 32
        async with websockets.connect(url, subprotocols=["trace-v1"]) as socket:
            await socket.recv()

    with pytest.raises(websockets.exceptions.WebSocketException):
        asyncio.run(scenario())


def test_filters() -> None:
    event = TailEvent(
        "w",
        "exception",
        0,
        method="GET",
        headers={"X-A": "abc"},
        logs=(TailLog("log", ("needle",), 0),),
    )
    assert matches(({"outcome": ["exception"]}, {"method": ["GET"]}), event)
    assert not matches(({"outcome": ["ok"]},), event)
    assert matches(({"header": {"key": "x-a", "query": "b"}},), event)
    assert not matches(({"header": {"key": "x-b"}},), event)
    assert matches(({"query": "needle"},), event) and not matches(({"query": "hay"},), event)
    assert not matches(({"sampling_rate": 0.0},), event)


def test_a_tail_socket_closes_when_its_session_is_six_hours_old(platform: RunningPlatform) -> None:
    """Cloudflare's tail sessions last six hours; the socket of one ends then (1000 "the tail
    session ended"), not only when the session is deleted or its account expires."""
    account_id, client = _deploy(platform)
    created = client.post(f"/accounts/{account_id}/workers/scripts/hello/tails").json()["result"]
    script_id = platform.plane.scripts.get(platform.plane.accounts.get(account_id), "hello").id

    async def scenario() -> tuple[str, int, str]:
        async with websockets.connect(created["url"], subprotocols=["trace-v1"]) as socket:
            deadline = time.monotonic() + 5
            while not platform.hub.has_subscribers(script_id) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            platform.clock.advance(6 * 3600 + 1)  # its six hours are up
            now = int(time.time() * 1000)
            platform.hub.publish(script_id, TailEvent("hello", "ok", now, method="GET", url="/z"))
            event = await asyncio.wait_for(socket.recv(), 10)  # the one it had coming
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(socket.recv(), 10)
            return str(event), closed.value.rcvd.code, closed.value.rcvd.reason

    event, code, reason = asyncio.run(scenario())
    assert "/z" in event
    assert (code, reason) == (1000, "the tail session ended")
