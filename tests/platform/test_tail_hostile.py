"""Tail sessions against a hostile or former tenant: filters of the wrong type are refused when
the tail is created (they used to raise on every invocation of the worker), and a session ends
when it is deleted or when the claim of a temporary account revokes the token that opened it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from ember.runtime.deployments.records import Tail
from ember.runtime.deployments.tail_events import (
    MAX_SOCKETS_PER_SCRIPT,
    QUEUE_BYTES,
    TailEvent,
    TailHub,
    TailLog,
)
from ember.runtime.deployments.tails import MAX_FILTER_BYTES, MAX_SESSIONS_PER_SCRIPT
from tests.platform.conftest import RunningPlatform
from tests.platform.helpers import error_of, temporary_account
from tests.platform.test_hostile_input import _put


@pytest.fixture
def tenant(platform: RunningPlatform) -> tuple[str, httpx.Client]:
    account, issued = platform.plane.accounts.create_permanent("mallory")
    return account.id, platform.client(issued.token)


@pytest.mark.parametrize(
    "bad",
    [
        {"sampling_rate": "half"},
        {"sampling_rate": 7},
        {"outcome": 5},
        {"method": "GET"},
        {"header": "x-a"},
        {"header": {"key": 1}},
        {"query": ["a"]},
        {"client_ip": [1]},
    ],
)
def test_tail_filters_of_the_wrong_type_are_refused_when_created(
    platform: RunningPlatform, tenant: tuple[str, httpx.Client], bad: dict[str, object]
) -> None:
    """They used to be stored, then raised inside ``TailHub.publish`` on every invocation."""
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    reply = client.post(f"/accounts/{account_id}/workers/scripts/w/tails", json={"filters": [bad]})
    status, code, message = error_of(reply)
    assert (status, code) == (400, 10001) and repr(next(iter(bad))) in message


def test_claim_ends_the_tail_sessions_of_the_temporary_token(platform: RunningPlatform) -> None:
    """The claim revokes the deployer's token; a tail URL it got before must stop too, or the
    deployer keeps reading the new owner's logs for the tail's six hours."""
    temp = temporary_account(platform)
    account_id = str(temp["account"]["id"])  # type: ignore[index]
    with platform.client(str(temp["account"]["apiToken"])) as client:  # type: ignore[index]
        assert _put(client, account_id, "w").status_code == 200
        created = client.post(f"/accounts/{account_id}/workers/scripts/w/tails", json={})
    url = created.json()["result"]["url"]
    script_id = platform.plane.scripts.get(platform.plane.accounts.get(account_id), "w").id

    async def scenario() -> tuple[str | None, int | None]:
        async with websockets.connect(url, subprotocols=["trace-v1"]) as socket:
            await socket.send(json.dumps({"debug": False}))
            for _ in range(200):  # until the hub has the subscriber
                if platform.hub.has_subscribers(script_id):
                    break
                await asyncio.sleep(0.01)
            claimed = await asyncio.to_thread(
                httpx.post,
                platform.api + "/provisioning/previews/claim",
                json={"claimToken": temp["claim"]["token"]},  # type: ignore[index]
            )
            assert claimed.status_code == 200, claimed.text
            platform.hub.publish(script_id, TailEvent("w", "ok", 0, logs=()))
            try:
                frame = await asyncio.wait_for(socket.recv(), 30)
            except websockets.ConnectionClosed as closed:
                return None, closed.rcvd.code if closed.rcvd else None
            return str(frame), None

    frame, code = asyncio.run(scenario())
    assert frame is None and code == 1000

    async def reopen() -> None:
        async with websockets.connect(url, subprotocols=["trace-v1"]) as socket:
            await socket.recv()

    with pytest.raises(websockets.exceptions.InvalidStatus):  # refused at the handshake
        asyncio.run(reopen())


def test_deleting_a_tail_closes_its_open_socket(
    platform: RunningPlatform, tenant: tuple[str, httpx.Client]
) -> None:
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    tails = f"/accounts/{account_id}/workers/scripts/w/tails"
    created = client.post(tails, json={}).json()["result"]
    script_id = platform.plane.scripts.get(platform.plane.accounts.get(account_id), "w").id

    async def scenario() -> int | None:
        async with websockets.connect(created["url"], subprotocols=["trace-v1"]) as socket:
            for _ in range(200):
                if platform.hub.has_subscribers(script_id):
                    break
                await asyncio.sleep(0.01)
            deleted = await asyncio.to_thread(client.delete, f"{tails}/{created['id']}")
            assert deleted.status_code == 200
            try:
                await asyncio.wait_for(socket.recv(), 30)
            except websockets.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    assert asyncio.run(scenario()) == 1000
    assert not platform.hub.has_subscribers(script_id)


def test_an_unread_tail_pins_a_bounded_number_of_bytes() -> None:
    """A socket that never reads keeps its pending events in the supervisor: bounded in bytes,
    not only in count (1000 events of a few MiB each was gigabytes)."""
    hub = TailHub()
    tail = Tail("t", "script", 0.0, 1e12, ())
    big = TailEvent("w", "ok", 0, logs=(TailLog("log", ("x" * (1024 * 1024),), 0),))

    async def scenario() -> tuple[int, int]:
        queue = hub.subscribe(tail)
        for _ in range(100):
            hub.publish("script", big)
        await asyncio.sleep(0)  # let the loop run the offers
        first = await queue.get()
        return queue.queued_bytes + len(first), len(first)

    queued, one = asyncio.run(scenario())
    assert one > 1024 * 1024
    assert queued <= QUEUE_BYTES < 100 * one


def test_a_worker_takes_a_bounded_number_of_tail_sockets(
    platform: RunningPlatform, tenant: tuple[str, httpx.Client]
) -> None:
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    tails = f"/accounts/{account_id}/workers/scripts/w/tails"
    url = client.post(tails, json={}).json()["result"]["url"]
    script_id = platform.plane.scripts.get(platform.plane.accounts.get(account_id), "w").id

    async def scenario() -> int | None:
        sockets = [
            await websockets.connect(url, subprotocols=["trace-v1"])
            for _ in range(MAX_SOCKETS_PER_SCRIPT)
        ]
        try:
            for _ in range(200):
                if len(platform.hub._subscribers.get(script_id, [])) == MAX_SOCKETS_PER_SCRIPT:
                    break
                await asyncio.sleep(0.01)
            async with websockets.connect(url, subprotocols=["trace-v1"]) as extra:
                try:
                    await asyncio.wait_for(extra.recv(), 30)
                except websockets.ConnectionClosed as closed:
                    return closed.rcvd.code if closed.rcvd else None
            return None
        finally:
            for socket in sockets:
                await socket.close()

    assert asyncio.run(scenario()) == 1013


def test_tail_sessions_of_a_worker_are_bounded_oldest_first(
    platform: RunningPlatform, tenant: tuple[str, httpx.Client]
) -> None:
    """Each session is a row kept for six hours: a loop of creates (with 1 MiB of filters each)
    used to grow the platform's database without bound."""
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    tails = f"/accounts/{account_id}/workers/scripts/w/tails"
    huge = {"filters": [{"query": "q" * (MAX_FILTER_BYTES + 1)}]}
    status, code, message = error_of(client.post(tails, json=huge))
    assert (status, code) == (400, 10001) and "bytes of JSON" in message
    ids = [client.post(tails, json={}).json()["result"]["id"] for _ in range(25)]
    with platform.plane.db.reader() as conn:
        stored = {r["id"] for r in conn.execute("SELECT id FROM tails")}
    assert stored == set(ids[-MAX_SESSIONS_PER_SCRIPT:])
    for gone in ids[: 25 - MAX_SESSIONS_PER_SCRIPT]:
        assert error_of(client.delete(f"{tails}/{gone}"))[0] == 404
