"""The async batch queue's bound: it counts the batches still to run, and finished ones make
room for new ones (oldest first) instead of locking the tenant out until they expire."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from ember.bindings.ai.batches import MAX_PER_TENANT, BatchQueue
from ember.errors import EmberError

MODEL = "@cf/zai-org/glm-4.7-flash"
ONE = {"requests": [{"prompt": "hi"}]}


def accept(request: Mapping[str, Any], where: str) -> None:
    return None


async def settle(queue: BatchQueue, ids: list[str]) -> None:
    for _ in range(2000):
        if all("responses" in queue.poll("t", MODEL, i) for i in ids):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the batches never finished")


def test_finished_batches_make_room_oldest_first() -> None:
    async def scenario() -> None:
        async def answer(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            return {"response": "ok"}

        queue = BatchQueue(answer)
        ids = [queue.submit("t", MODEL, ONE, accept)["request_id"] for _ in range(MAX_PER_TENANT)]
        await settle(queue, ids)
        more = [queue.submit("t", MODEL, ONE, accept)["request_id"] for _ in range(3)]
        await settle(queue, more)
        with pytest.raises(EmberError, match="no queued request"):
            queue.poll("t", MODEL, ids[0])  # the oldest finished ones made the room
        assert queue.poll("t", MODEL, ids[3])["responses"][0]["success"] is True
        assert queue.submit("other", MODEL, ONE, accept)["status"] == "queued"
        await queue.aclose()

    asyncio.run(scenario())


def test_the_bound_counts_batches_still_to_run() -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def wait(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            await release.wait()
            return {"response": "ok"}

        queue = BatchQueue(wait)
        ids = [queue.submit("t", MODEL, ONE, accept)["request_id"] for _ in range(MAX_PER_TENANT)]
        with pytest.raises(EmberError, match=f"{MAX_PER_TENANT} batches queued or running"):
            queue.submit("t", MODEL, ONE, accept)
        release.set()
        await settle(queue, ids)
        assert queue.submit("t", MODEL, ONE, accept)["status"] == "queued"
        await queue.aclose()

    asyncio.run(scenario())


def test_an_item_over_its_accounts_share_waits_for_it_instead_of_failing() -> None:
    """A batch is a queue: an item refused with 3036 (the account's share of the model, or its
    quota) is tried again after the refusal's Retry-After, not answered as failed."""
    from ember.models.pool.errors import quota_exceeded

    async def scenario() -> None:
        refusals = [2]

        async def crowded(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            if refusals[0] > 0:
                refusals[0] -= 1
                raise quota_exceeded("share", 2, 1, "Account limited: busy", 0.01)
            return {"response": "ok"}

        queue = BatchQueue(crowded)
        request_id = queue.submit("t", MODEL, ONE, accept)["request_id"]
        await settle(queue, [request_id])
        (entry,) = queue.poll("t", MODEL, request_id)["responses"]
        assert entry["success"] is True and entry["result"] == {"response": "ok"}, entry
        await queue.aclose()

    asyncio.run(scenario())
