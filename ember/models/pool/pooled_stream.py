"""``PooledStream``: a replica's event stream that holds its pool slot until it ends.

``ModelPool.stream`` returns one; whoever reads it (the AI gateway) never has to give the slot
back by hand: the end of the stream, a failure, ``aclose`` or the request's deadline does.
"""

from __future__ import annotations

import asyncio

from ember.models.pool import errors
from ember.models.pool.upstream import EventStream

TIMED_OUT = "the request timed out"  # the lease failure a deadline records


class PooledStream:
    """A replica's event stream that gives its slot back when it ends, however it ends."""

    def __init__(self, events: EventStream, deadline: float) -> None:
        self._events = events
        self._timer = asyncio.get_running_loop().call_later(deadline, self._expire)
        self.timed_out = False
        self.replica = events.lease.replica

    def _expire(self) -> None:
        self.timed_out = True
        self._events.lease.outcome(TIMED_OUT)
        self._events.lease.fail(TIMED_OUT)
        # Whether or not anybody still reads it, the replica stops and the slot is freed.
        self._closer = asyncio.ensure_future(self.aclose())

    def __aiter__(self) -> PooledStream:
        return self

    async def __anext__(self) -> str:
        try:
            data = await self._events.__anext__()
        except StopAsyncIteration:
            self._events.lease.outcome(None)
            await self.aclose()
            raise
        except errors.UpstreamFailed as exc:
            self._events.lease.outcome(exc.description)
            await self.aclose()
            if self.timed_out:
                raise errors.timed_out() from None
            raise
        if data == "[DONE]":  # the consumer may stop reading here: the answer is complete
            self._events.lease.outcome(None)
        return data

    async def next_batch(self) -> list[str]:
        """Every event available now (see ``EventStream.next_batch``); [] at the end."""
        try:
            batch = await self._events.next_batch()
        except errors.UpstreamFailed as exc:
            self._events.lease.outcome(exc.description)
            await self.aclose()
            if self.timed_out:
                raise errors.timed_out() from None
            raise
        if not batch:
            self._events.lease.outcome(None)
            await self.aclose()
        elif batch[-1] == "[DONE]":  # the consumer may stop reading here: the answer is complete
            self._events.lease.outcome(None)
        return batch

    @property
    def renamed(self) -> bool:
        """True when the replica calls the model by another name than the pool's id."""
        return self.replica.served_name != self.replica.model_id

    async def aclose(self) -> None:
        """Stop (the replica aborts the generation) and give the slot back; idempotent."""
        self._timer.cancel()
        await self._events.aclose()
        self._events.lease.release()
