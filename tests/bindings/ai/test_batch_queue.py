"""The async batch queue's bound: it counts the batches still to run, and finished ones make
room for new ones (oldest first) instead of locking the tenant out until they expire."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from ember.bindings.ai import batches
from ember.bindings.ai.batches import MAX_PER_TENANT, BatchQueue
from ember.errors import EmberError, InvalidModelInput

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


def test_a_tenants_batches_are_bounded_by_bytes_and_an_item_run_lets_its_inputs_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """review22: 64 batches of ~10 MB each held ~700 MiB of one account's inputs. A tenant's
    kept bytes (inputs not yet run, answers) are bounded; a run item's inputs are dropped, so a
    running batch makes room as it goes; finished batches make room oldest first, and every
    tenant together is bounded too (3040), without touching another tenant's batches."""
    monkeypatch.setattr(batches, "MAX_TENANT_BYTES", 10_000)
    monkeypatch.setattr(batches, "MAX_TOTAL_BYTES", 22_000)
    big = {"requests": [{"prompt": "x" * 3_000}, {"prompt": "y" * 3_000}]}  # ~6 KB

    async def scenario() -> None:
        gates: list[asyncio.Event] = []

        async def hold(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            gates.append(asyncio.Event())
            await gates[-1].wait()
            return {"response": "ok"}

        queue = BatchQueue(hold)
        first = queue.submit("t", MODEL, big, accept)["request_id"]
        with pytest.raises(EmberError, match="bytes of batches queued or running") as full:
            queue.submit("t", MODEL, big, accept)
        assert full.value.retry_after and "at most 10,000 bytes" in str(full.value)
        while len(gates) < 2:
            await asyncio.sleep(0.001)
        gates[0].set()  # one of the two items runs: its 3 KB of inputs go, a small answer stays
        while queue.poll("t", MODEL, first)["completed"] < 1:
            await asyncio.sleep(0.001)
        second = queue.submit("t", MODEL, {"requests": [{"prompt": "z" * 3_000}]}, accept)
        assert second["status"] == "queued"
        for tenant in ("u", "v", "w"):  # t holds ~6 KB; u and v 6 KB each; w would pass 22 KB
            if tenant == "w":
                with pytest.raises(EmberError, match="3040") as capacity:
                    queue.submit(tenant, MODEL, big, accept)
                assert "all accounts" in capacity.value.limit, capacity.value.limit
            else:
                queue.submit(tenant, MODEL, big, accept)
        assert queue.poll("t", MODEL, first)["status"] == "running"  # nobody else's was dropped
        for gate in gates:
            gate.set()
        await queue.aclose()

    asyncio.run(scenario())


def test_answers_count_against_the_bound_as_they_come(monkeypatch: pytest.MonkeyPatch) -> None:
    """review23: small requests with long answers got past the admission check (384 MiB held
    for one account under a 64 MiB bound). An answer makes room among the tenant's finished
    batches, oldest first, and past the bound with none left it is not kept: its entry says so."""
    monkeypatch.setattr(batches, "MAX_TENANT_BYTES", 10_000)

    async def scenario() -> None:
        async def long(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            return {"response": "x" * 3_000}

        queue = BatchQueue(long)
        first = queue.submit("t", MODEL, {"requests": [{"prompt": "a"}] * 2}, accept)
        await settle(queue, [first["request_id"]])
        assert all(e["success"] for e in queue.poll("t", MODEL, first["request_id"])["responses"])
        second = queue.submit("t", MODEL, {"requests": [{"prompt": "b"}] * 5}, accept)
        await settle(queue, [second["request_id"]])
        with pytest.raises(EmberError, match="no queued request"):  # it made room
            queue.poll("t", MODEL, first["request_id"])
        entries = queue.poll("t", MODEL, second["request_id"])["responses"]
        assert [e["success"] for e in entries] == [True, True, True, False, False], entries
        assert entries[3]["errors"][0]["code"] == 3036
        assert "was not kept" in entries[3]["errors"][0]["message"]
        assert sum(b.held for b in queue._batches.values()) <= 10_000
        await queue.aclose()

    asyncio.run(scenario())


def test_the_total_drops_other_tenants_finished_batches_only_past_their_minimum_keep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """review23: finished batches of a few accounts filled the total and refused everyone's
    batches (3040) for their hour. Past the total, other tenants' batches finished at least
    MIN_KEEP_S ago make room, oldest first; younger ones are kept and the new batch refused."""
    monkeypatch.setattr(batches, "MAX_TOTAL_BYTES", 12_000)
    now = [0.0]
    big = {"requests": [{"prompt": "x" * 5_000}]}

    async def scenario() -> None:
        async def answer(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            return {"response": "y" * 5_000}

        queue = BatchQueue(answer, clock=lambda: now[0])
        done = [queue.submit(t, MODEL, big, accept)["request_id"] for t in ("a", "b")]
        for tenant, request_id in zip(("a", "b"), done, strict=True):
            for _ in range(2000):
                if "responses" in queue.poll(tenant, MODEL, request_id):
                    break
                await asyncio.sleep(0.005)
        now[0] = 60.0
        with pytest.raises(EmberError, match="3040"):
            queue.submit("c", MODEL, big, accept)
        assert "responses" in queue.poll("a", MODEL, done[0])  # kept: too young to drop
        now[0] = batches.MIN_KEEP_S + 1
        assert queue.submit("c", MODEL, big, accept)["status"] == "queued"
        with pytest.raises(EmberError, match="no queued request"):
            queue.poll("a", MODEL, done[0])  # the oldest made room
        assert "responses" in queue.poll("b", MODEL, done[1])
        await queue.aclose()

    asyncio.run(scenario())


def test_an_answer_that_cannot_be_kept_drops_no_finished_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """review24: an answer too big to keep even with every finished batch of its account gone
    still deleted them, and their polls then said "no queued request"."""
    monkeypatch.setattr(batches, "MAX_TENANT_BYTES", 10_000)

    async def scenario() -> None:
        async def answer(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            return {"response": "x" * int(request["prompt"])}

        queue = BatchQueue(answer)
        small = queue.submit("t", MODEL, {"requests": [{"prompt": "100"}]}, accept)
        await settle(queue, [small["request_id"]])
        huge = queue.submit("t", MODEL, {"requests": [{"prompt": "20000"}]}, accept)
        await settle(queue, [huge["request_id"]])
        (entry,) = queue.poll("t", MODEL, huge["request_id"])["responses"]
        assert entry["success"] is False and "was not kept" in entry["errors"][0]["message"]
        (kept,) = queue.poll("t", MODEL, small["request_id"])["responses"]
        assert kept["success"] is True  # still there
        await queue.aclose()

    asyncio.run(scenario())


def test_a_request_whose_answer_could_not_be_kept_is_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """review24: once an account's batches still to run fill its bytes, its next requests were
    run on the model and their answers thrown away. They are not run, and say why; a request's
    own error is kept as it is past the bound, never replaced by the bound's."""
    monkeypatch.setattr(batches, "MAX_TENANT_BYTES", 10_000)
    asked: list[str] = []

    async def scenario() -> None:
        gate = asyncio.Event()

        async def answer(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            asked.append(request["prompt"][:3])
            await gate.wait()
            if request["prompt"] == "bad":
                raise InvalidModelInput("/prompt", "the request's own failure")
            return {"response": "ok"}

        queue = BatchQueue(answer)
        held = queue.submit("t", MODEL, {"requests": [{"prompt": "x" * 9_950}]}, accept)
        while not asked:
            await asyncio.sleep(0.001)
        small = queue.submit("t", MODEL, {"requests": [{"prompt": "a"}, {"prompt": "b"}]}, accept)
        await settle(queue, [small["request_id"]])
        entries = queue.poll("t", MODEL, small["request_id"])["responses"]
        assert [e["success"] for e in entries] == [False, False], entries
        assert all("not run" in e["errors"][0]["message"] for e in entries), entries
        assert asked == ["xxx"]  # a and b never reached the model
        gate.set()
        await settle(queue, [held["request_id"]])
        monkeypatch.setattr(batches, "MAX_TENANT_BYTES", 200)  # now over the bound
        failing = queue.submit("t", MODEL, {"requests": [{"prompt": "bad"}]}, accept)
        await settle(queue, [failing["request_id"]])
        (entry,) = queue.poll("t", MODEL, failing["request_id"])["responses"]
        assert "the request's own failure" in entry["errors"][0]["message"], entry
        await queue.aclose()

    asyncio.run(scenario())


def test_a_refused_batch_drops_no_finished_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """review25: a batch refused for the account's bytes (or the total) had already dropped the
    account's (or other accounts' old) finished batches to make room it could not use."""
    monkeypatch.setattr(batches, "MAX_TENANT_BYTES", 10_000)
    now = [0.0]

    async def scenario() -> None:
        gate = asyncio.Event()

        async def answer(tenant: str, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
            if request.get("slow"):
                await gate.wait()
            return {"response": "ok"}

        queue = BatchQueue(answer, clock=lambda: now[0])
        done = queue.submit("t", MODEL, {"requests": [{"prompt": "a"}]}, accept)
        other = queue.submit("u", MODEL, {"requests": [{"prompt": "b"}]}, accept)
        await settle(queue, [done["request_id"]])
        queue.submit("t", MODEL, {"requests": [{"slow": True, "prompt": "x" * 9_000}]}, accept)
        with pytest.raises(EmberError, match="bytes of batches queued or running"):
            queue.submit("t", MODEL, {"requests": [{"prompt": "y" * 2_000}]}, accept)
        assert "responses" in queue.poll("t", MODEL, done["request_id"])  # still there
        monkeypatch.setattr(batches, "MAX_TOTAL_BYTES", 12_000)
        now[0] = batches.MIN_KEEP_S + 1  # u's batch is old enough to make room, not enough
        with pytest.raises(EmberError, match="3040"):
            queue.submit("v", MODEL, {"requests": [{"prompt": "z" * 3_000}]}, accept)
        assert "responses" in queue.poll("u", MODEL, other["request_id"])
        gate.set()
        await queue.aclose()

    asyncio.run(scenario())
