"""Async batches: ``env.AI.run(model, {"requests": [...]}, {"queueRequest": True})``.

Queueing answers at once with ``{"status": "queued", "model", "request_id"}``; the batch runs in
the background (a few requests at a time, through the same pool as everything else) and
``env.AI.run(model, {"request_id": id})`` polls it: ``{"status": "queued" | "running", ...}``
until it is done, then ``{"responses": [{"id", "result", "success", "external_reference"}],
"usage": {...}}``. A request id is visible only to the tenant that queued it. Batches live in
memory (lost when the supervisor stops), at most ``MAX_PER_TENANT`` and ``MAX_TENANT_BYTES`` per
tenant and ``MAX_TOTAL_BYTES`` in all (a request's inputs count until it has run, then its
answer); finished ones are kept for ``KEEP_DONE_S``, or until the room is needed: a tenant's new
batch or answer makes room among its own finished batches, oldest first (an answer past the bound
with none left to drop is not kept: its entry says so), and a batch past the total among every
tenant's finished at least ``MIN_KEEP_S`` ago.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.bindings.ai.failures import failure_of
from ember.bindings.ai.tenant import describe_scope
from ember.errors import InvalidModelInput
from ember.models.api.errors import OUT_OF_CAPACITY, InvalidRequestField
from ember.models.api.fields import describe
from ember.models.pool.errors import QUOTA_EXCEEDED, CapacityExceeded, quota_exceeded
from ember.wirejson import json_size

MAX_REQUESTS = 1000
MAX_PER_TENANT = 64
KEEP_DONE_S = 3600.0
PARALLEL = 2
WAIT_FOR_SHARE_S = 600.0  # how long an item refused with 3036 keeps trying
# Bytes kept in the supervisor's memory (JSON of the inputs not yet run and of the answers):
# 64 batches of ~10 MB each held ~700 MiB of one tenant's inputs until they finished.
MAX_TENANT_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 512 * 2**20
FULL_RETRY_AFTER_S = 60.0
MIN_ANSWER_BYTES = 64  # the smallest answer entry: below this, a request is not worth running
MIN_KEEP_S = 600.0  # a finished batch is never dropped for another tenant's sooner

# (tenant, model, request): the tenant's requests share the model with its other calls.
RunOne = Callable[[str, str, Mapping[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(eq=False)
class _Batch:
    request_id: str
    tenant: str
    model: str
    requests: list[dict[str, Any] | None]  # None once run: its inputs are not kept
    sizes: list[int]  # bytes of each request's inputs
    status: str = "queued"
    held: int = 0  # bytes kept: inputs not yet run, answers
    responses: list[dict[str, Any] | None] = field(default_factory=list)
    finished: float | None = None
    task: asyncio.Task[None] | None = None


def requests_of(inputs: Mapping[str, Any]) -> list[Any]:
    """A batch's ``requests``, or the 5006 naming what it should be."""
    requests = inputs.get("requests")
    if not isinstance(requests, list) or not 1 <= len(requests) <= MAX_REQUESTS:
        found = "nothing" if "requests" not in inputs else describe(requests)
        raise InvalidRequestField("/requests", f"an array of 1 to {MAX_REQUESTS} requests", found)
    return requests


class BatchQueue:
    """Every tenant's queued batches."""

    def __init__(self, run_one: RunOne, clock: Callable[[], float] = time.monotonic) -> None:
        self._run_one = run_one
        self._clock = clock
        self._batches: dict[str, _Batch] = {}

    def submit(
        self,
        tenant: str,
        model: str,
        inputs: Mapping[str, Any],
        validate: Callable[[Mapping[str, Any], str], None] | None,
    ) -> dict[str, Any]:
        """Validate and queue ``inputs["requests"]``; the platform's ``queued`` answer.
        ``validate``: None when the caller validated each of ``requests_of(inputs)`` (the
        gateway does, off the event loop: their schemas may cost seconds to compile)."""
        requests = requests_of(inputs)
        for index, request in enumerate(requests if validate is not None else ()):
            validate(request, f"/requests/{index}")
        sizes = [json_size(r) for r in requests]
        incoming = sum(sizes)
        self.check_room(tenant)
        mine = [b for b in self._batches.values() if b.tenant == tenant]
        # Finished batches wait to be polled for KEEP_DONE_S, but never lock the tenant out:
        # past the bounds the oldest finished ones make room (memory stays bounded either way),
        # and only when that admits the new batch: never dropped for one refused anyway.
        running = sum(b.held for b in mine if b.finished is None)
        if running + incoming > MAX_TENANT_BYTES:
            raise quota_exceeded(
                "bytes of queued AI batches",
                running + incoming,
                MAX_TENANT_BYTES,
                f"Account limited: {describe_scope(tenant)} holds {running:,} bytes of batches "
                f"queued or running, and this one is {incoming:,} (at most "
                f"{MAX_TENANT_BYTES:,} bytes of requests and answers); room is made as they run.",
                FULL_RETRY_AFTER_S,
            )
        mine_dropped: list[_Batch] = []
        kept, count = sum(b.held for b in mine), len(mine)
        for old in sorted((b for b in mine if b.finished is not None), key=lambda b: b.finished):
            if count < MAX_PER_TENANT and kept + incoming <= MAX_TENANT_BYTES:
                break
            mine_dropped.append(old)
            kept, count = kept - old.held, count - 1
        total = sum(b.held for b in self._batches.values()) - sum(b.held for b in mine_dropped)
        now = self._clock()
        others = [
            b
            for b in self._batches.values()
            if b.finished is not None and now - b.finished >= MIN_KEEP_S and b not in mine_dropped
        ]
        if total - sum(b.held for b in others) + incoming > MAX_TOTAL_BYTES:
            raise CapacityExceeded(
                OUT_OF_CAPACITY,
                limit="bytes of queued AI batches, all accounts",
                observed=total + incoming,
                maximum=MAX_TOTAL_BYTES,
                retry_after=FULL_RETRY_AFTER_S,
            )
        for old in mine_dropped:
            del self._batches[old.request_id]
        self._drop_oldest(others, total, incoming, MAX_TOTAL_BYTES)
        batch = _Batch(
            f"{secrets.token_hex(16)}", tenant, model, [dict(r) for r in requests], sizes
        )
        batch.held = incoming
        batch.responses = [None] * len(requests)
        batch.task = asyncio.ensure_future(self._run(batch))
        self._batches[batch.request_id] = batch
        return {"status": "queued", "model": model, "request_id": batch.request_id}

    def check_room(self, tenant: str) -> None:
        """Raise 3036 when ``tenant`` has ``MAX_PER_TENANT`` batches queued or running: checked
        again at ``submit``, and first before a batch's schemas compile (they may cost
        seconds), so that a refused batch costs nothing."""
        self._expire()
        unfinished = sum(b.finished is None for b in self._batches.values() if b.tenant == tenant)
        if unfinished >= MAX_PER_TENANT:
            raise quota_exceeded(
                "queued AI batches",
                unfinished + 1,
                MAX_PER_TENANT,
                f"Account limited: {describe_scope(tenant)} already has {unfinished} batches "
                f"queued or running (at most {MAX_PER_TENANT}); one more is taken as one finishes.",
                60.0,
            )

    def poll(self, tenant: str, model: str, request_id: object) -> dict[str, Any]:
        """The batch's state, or its responses once done."""
        batch = self._batches.get(request_id) if isinstance(request_id, str) else None
        if batch is None or batch.tenant != tenant:
            raise InvalidModelInput(
                "/request_id",
                f"Invalid value at '/request_id': no queued request {request_id!r} for this "
                "account",
            )
        if batch.status != "done":
            done = sum(r is not None for r in batch.responses)
            return {
                "status": batch.status,
                "model": batch.model,
                "request_id": batch.request_id,
                "completed": done,
                "total": len(batch.requests),
            }
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for response in batch.responses:
            result_usage = (response or {}).get("result", {}).get("usage") or {}
            for key in usage:
                usage[key] += int(result_usage.get(key) or 0)
        return {"responses": list(batch.responses), "usage": usage}

    async def _run(self, batch: _Batch) -> None:
        batch.status = "running"
        slots = asyncio.Semaphore(PARALLEL)

        async def one(index: int) -> None:
            request = batch.requests[index]
            assert request is not None  # each index runs once
            reference = request.pop("external_reference", None)
            entry: dict[str, Any] = {"id": index, "external_reference": reference}
            async with slots:
                deadline = self._clock() + WAIT_FOR_SHARE_S
                full = self._full(batch, index)
                while full is None:
                    try:
                        entry["result"] = await self._run_one(batch.tenant, batch.model, request)
                        entry["success"] = True
                        break
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # each request's failure is its own entry
                        failure = failure_of(exc, batch.model)
                        if failure.code is QUOTA_EXCEEDED and self._clock() < deadline:
                            # The account's share or quota is taken (3036): a queued batch
                            # waits its turn, as the caller would after Retry-After.
                            await asyncio.sleep(failure.retry_after or 1.0)
                            continue
                        entry["success"] = False
                        entry["errors"] = [
                            {"code": failure.code.code, "message": failure.description}
                        ]
                        break
                else:  # no answer could be kept: the model is not asked (review24)
                    entry["success"] = False
                    entry["errors"] = [{"code": QUOTA_EXCEEDED.code, "message": full}]
            batch.requests[index] = None
            batch.held -= batch.sizes[index]
            batch.responses[index] = self._kept(batch, entry)

        await asyncio.gather(*(one(i) for i in range(len(batch.requests))))
        batch.status = "done"
        batch.finished = self._clock()

    def _full(self, batch: _Batch, index: int) -> str | None:
        """Why request ``index`` is not run: even with its inputs and every finished batch of
        its account gone, the account's bytes leave no room for an answer; else None."""
        mine = [b for b in self._batches.values() if b.tenant == batch.tenant]
        kept = sum(b.held for b in mine) - batch.sizes[index]
        kept -= sum(b.held for b in mine if b.finished is not None)
        if kept + MIN_ANSWER_BYTES <= MAX_TENANT_BYTES:
            return None
        return (
            f"Account limited: not run: {describe_scope(batch.tenant)}'s batches still to run "
            f"hold {kept:,} bytes of requests and answers (at most {MAX_TENANT_BYTES:,}), no "
            "room for an answer"
        )

    def _kept(self, batch: _Batch, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry``, counted in its tenant's bytes, after the tenant's oldest finished batches
        made room for it; past the bound even without them, an error entry in its place (answers
        are not reserved at admission: a small request can have a long answer). Error entries
        are counted too, past the bound: a few hundred bytes each, at most one per request."""
        size = json_size(entry)
        if not entry.get("success"):  # an error entry says why: kept as it is, past the bound
            batch.held += size
            return entry
        kept = sum(b.held for b in self._batches.values() if b.tenant == batch.tenant)
        finished = [
            b for b in self._batches.values() if b.tenant == batch.tenant and b.finished is not None
        ]
        # Finished batches go only if dropping them makes the room: else they would be lost for
        # an answer that is not kept anyway (review24).
        if kept + size - sum(old.held for old in finished) <= MAX_TENANT_BYTES:
            kept = self._drop_oldest(finished, kept, size, MAX_TENANT_BYTES)
        if kept + size > MAX_TENANT_BYTES:
            entry = {
                "id": entry["id"],
                "external_reference": entry.get("external_reference"),
                "success": False,
                "errors": [
                    {
                        "code": QUOTA_EXCEEDED.code,
                        "message": f"Account limited: this answer ({size:,} bytes) was not kept: "
                        f"{describe_scope(batch.tenant)}'s batches already hold {kept:,} bytes "
                        f"of requests and answers (at most {MAX_TENANT_BYTES:,})",
                    }
                ],
            }
            size = json_size(entry)
        batch.held += size
        return entry

    def _drop_oldest(self, finished: list[_Batch], used: int, needed: int, bound: int) -> int:
        """Drop ``finished`` batches, oldest first, while ``used + needed`` passes ``bound``;
        the bytes still used."""
        for batch in sorted(finished, key=lambda b: b.finished or 0.0):
            if used + needed <= bound:
                break
            del self._batches[batch.request_id]
            used -= batch.held
        return used

    def _expire(self) -> None:
        now = self._clock()
        for request_id, batch in list(self._batches.items()):
            if batch.finished is not None and now - batch.finished > KEEP_DONE_S:
                del self._batches[request_id]

    async def aclose(self) -> None:
        """Cancel unfinished batches (they are in memory only)."""
        tasks = [b.task for b in self._batches.values() if b.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._batches.clear()
