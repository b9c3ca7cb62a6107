"""One model's admission: which replica takes a request, and who waits.

- **Least outstanding work**: a request goes to the ready replica with the fewest requests in
  flight that still has a free slot (``max_running_requests``); ties rotate. A replica ejected
  after failed requests (``outlier.py``) is passed over while one in rotation can serve.
- **Session affinity**: requests of one account carrying the same ``x-session-affinity`` value
  go to the replica that served the session first, for as long as it is ready (its prefix cache
  holds the conversation); if it is busy they wait for it rather than spill over, and if it
  died the session moves to the next best replica. The table (``sessions.py``) is keyed by
  account and value, bounded, and so is each account's part of it.
- **Weight**: a request of ``n`` choices takes n slots (the replica runs n sequences for it);
  one that does not fit yet holds its turn, so that lighter requests behind it cannot
  keep it waiting forever.
- **Fair share** (``fair.py``): a request carrying a ``Fairness`` (its account, on
  ``ember serve``) is refused with 3036 once its account holds ``account_cap`` requests of this
  model, running or queued, or its ``waiting`` bound of queued ones; and a freed slot goes to
  the account with the fewest sequences running here, round-robin among equals, each
  account's own requests in arrival order.
- **Bounded queue**: with no free slot a request waits in that fair order (it takes its place
  in the same step that found no slot, so a slot freed meanwhile goes to the queue, never to a
  later request), at most
  ``max_queued_requests`` of them; the next one is refused with 3040 at once (backpressure, never
  an unbounded queue). ``rejectIfBusy`` refuses instead of waiting, once a replica is ready
  (while the model is still loading there are no busy slots to refuse over). A waiter gives up
  after ``queue_timeout_s`` (3007); once every replica's latest start failed (after one failed
  start, while the pool still retries: ``start_failure.py``), waiters and new requests fail at
  once with why (3043: a configuration that cannot start is not a capacity problem). A request whose
  replica could not be reached (the pool retries it on another, ``retry=True``) keeps its turn:
  it takes a free slot even while others wait, else the queue's head, and is never refused
  (it was admitted once; the slot it gave back has just gone to the queue), nor capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time

from ember.models.pool import errors
from ember.models.pool.fair import AccountCap, Fairness, FairQueue, Ticket
from ember.models.pool.lease import Lease
from ember.models.pool.replica import Replica, State
from ember.models.pool.sessions import SessionTable

__all__ = ["ModelGroup", "Ticket"]


class ModelGroup:
    """The replicas of one model id and their queue."""

    def __init__(
        self,
        model_id: str,
        max_queued: int,
        queue_timeout: float,
        account_cap: AccountCap | None = None,
    ) -> None:
        self.model_id = model_id
        self.replicas: list[Replica] = []
        self.max_queued = max_queued
        self.queue_timeout = queue_timeout
        self.account_cap = account_cap
        self._waiters = FairQueue()
        self._sessions: SessionTable[Replica] = SessionTable()
        self._turn = itertools.count()

    @property
    def queued(self) -> int:
        return len(self._waiters)

    @property
    def outstanding(self) -> int:
        return sum(r.outstanding for r in self.replicas)

    def start(self) -> None:
        """Start every replica (lazy pools call this on the first request)."""
        for replica in self.replicas:
            replica.ensure_started()

    def acquire_now(
        self,
        session: str | None,
        reject_if_busy: bool,
        weight: int = 1,
        retry: bool = False,
        fairness: Fairness | None = None,
    ) -> Lease | Ticket:
        """A free slot at once, or a ``Ticket`` where ``acquire`` would queue; raises as it does.

        The pool's fast path: most requests find a slot, and this takes it without the timer
        that waiting under a deadline costs. A request that finds no slot is queued here, in
        the same step: were it queued only once its waiting task ran, a slot freed in between
        would go to whoever asked next, and it would lose its turn to a later request.
        """
        self.start()
        self._raise_if_hopeless()
        over = None if retry else self._over_cap(fairness)
        if (retry or not self._anyone_to_serve()) and over is None:
            lease = self._try(session, weight, fairness, retry)
            if lease is not None:
                return lease
        if not retry:
            self._admit(reject_if_busy, over, session, weight, fairness)
        future = asyncio.get_running_loop().create_future()
        ticket = Ticket(session, future, weight, fairness, retry)
        self._waiters.add(ticket)
        return ticket

    def _over_cap(self, fairness: Fairness | None) -> errors.CapacityExceeded | None:
        """The 3036 for a request whose account already holds its cap of this model."""
        cap = self.account_cap
        if cap is None or fairness is None:
            return None
        queued = self._waiters.queued(fairness.id)
        running = sum(1 for r in self.replicas for lease in r.leases if lease.owner == fairness.id)
        # A request that would run at once passes both bounds: a free slot with nobody waiting
        # means fewer than every slot running and nothing queued (and ``waiting`` >= 1).
        if running + queued < cap.maximum and (cap.waiting is None or queued < cap.waiting):
            return None
        return errors.account_limited(self.model_id, fairness.name, running, queued, cap)

    def _admit(
        self,
        reject_if_busy: bool,
        over: errors.CapacityExceeded | None = None,
        session: str | None = None,
        weight: int = 1,
        fairness: Fairness | None = None,
    ) -> None:
        """Refuse a request that would wait: ``rejectIfBusy`` (3040) or a full queue (3040);
        then one over its account's cap (``over``, 3036). A capped request that would have run
        at once gets only the 3036; one that would wait hears first of the model's own limits,
        which nobody can pass (the cap is this account's alone)."""
        if over is not None and not self._waiters and self._has_room(session, weight, fairness):
            raise over
        if reject_if_busy and self._serving():
            raise errors.busy(self.model_id)
        if len(self._waiters) >= self.max_queued:
            raise errors.queue_full(self.model_id, len(self._waiters), self.max_queued)
        if over is not None:
            raise over

    async def wait(self, ticket: Ticket, timeout: float) -> Lease:
        """The lease ``ticket`` is granted, within ``timeout`` and ``queue_timeout`` (3007
        past either); a waiter that gives up leaves the queue, and frees a lease granted in
        the meantime.

        Not ``asyncio.wait_for``: on Python 3.11 it returns the result when a cancellation
        arrives after the lease was granted but before the waiter ran, swallowing the
        cancellation; the caller then holds the slot (and waits on a replica that may never
        answer) although it was told to stop. Awaiting the future itself, a cancellation
        arriving at any moment is raised here, and the lease is given back."""
        timer = asyncio.get_running_loop().call_later(
            min(timeout, self.queue_timeout), _expire, ticket.future
        )
        try:
            return await ticket.future
        except BaseException:
            self._drop(ticket)
            raise
        finally:
            timer.cancel()

    def cancel(self, ticket: Ticket) -> None:
        """Leave the queue without waiting (a lease granted meanwhile is freed); the tests that
        compare ``acquire_now`` with ``acquire`` give up a place this way."""
        self._drop(ticket)

    async def acquire(
        self,
        session: str | None,
        reject_if_busy: bool,
        weight: int = 1,
        retry: bool = False,
        fairness: Fairness | None = None,
    ) -> Lease:
        """A slot on a replica; raises CapacityExceeded or UpstreamFailed (see module doc).

        Also the reference that ``acquire_now`` is tested against (tests/models/pool).
        """
        self.start()
        self._raise_if_hopeless()
        over = None if retry else self._over_cap(fairness)
        if (retry or not self._anyone_to_serve()) and over is None:
            lease = self._try(session, weight, fairness, retry)
            if lease is not None:
                return lease
        if not retry:
            self._admit(reject_if_busy, over, session, weight, fairness)
        future = asyncio.get_running_loop().create_future()
        waiter = Ticket(session, future, weight, fairness, retry)
        self._waiters.add(waiter)
        return await self.wait(waiter, self.queue_timeout)

    def _drop(self, waiter: Ticket) -> None:
        """A waiter gave up (timeout, cancellation): forget it, and free a lease granted late."""
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        future = waiter.future
        if not future.done():
            future.cancel()
        elif not future.cancelled() and future.exception() is None:
            future.result().release()

    def changed(self) -> None:
        """A replica changed state or freed a slot: serve waiters in order, where possible."""
        if not self._waiters:
            return
        if self._hopeless():
            self.fail_waiters(self._hopeless_error())
            return
        while self._next_served():
            pass

    def _next_served(self) -> bool:
        """Give one waiter a slot, the first in fair order that can take one (fair.py)."""
        for waiter in self._waiters.order(self._running()):
            if waiter.future.done():
                continue
            if not waiter.retry and self._at_running_share(waiter.fairness, waiter.weight):
                continue  # its account runs its share: the next account's turn, not a block
            lease = self._try(waiter.session, waiter.weight, waiter.fairness, waiter.retry)
            if lease is None:
                if waiter.weight > 1 or not any(r.has_room for r in self.replicas):
                    return False  # a heavy request keeps its turn; or nobody else can be served
                continue
            self._waiters.remove(waiter)
            waiter.future.set_result(lease)
            return True
        return False

    def _running(self) -> dict[str | None, int]:
        """Sequences each account has running on this model."""
        running: dict[str | None, int] = {}
        for replica in self.replicas:
            for lease in replica.leases:
                running[lease.owner] = running.get(lease.owner, 0) + lease.weight
        return running

    def _anyone_to_serve(self) -> bool:
        """Whether a waiter could take a free slot (a new request must not pass it); waiters
        whose accounts run their share of the slots cannot, and do not hold others back."""
        if not self._waiters:
            return False
        running = self._running()
        return any(
            w.retry or not self._at_running_share(w.fairness, w.weight, running)
            for w in self._waiters
        )

    def _at_running_share(
        self,
        fairness: Fairness | None,
        weight: int,
        running: dict[str | None, int] | None = None,
    ) -> bool:
        """Whether ``fairness``'s account already runs its share of this model's slots (one
        request alone always may run, however heavy: it would otherwise never start)."""
        if fairness is None or fairness.running_share is None:
            return False
        cap = fairness.running_cap(sum(r.config.slots for r in self.replicas))
        assert cap is not None  # invariant: a share gives a cap
        mine = (running if running is not None else self._running()).get(fairness.id, 0)
        return mine > 0 and mine + weight > cap

    def _try(
        self,
        session: str | None,
        weight: int = 1,
        fairness: Fairness | None = None,
        retry: bool = False,
    ) -> Lease | None:
        """A slot now, if one is free and the account is under its running share (a retried
        request was admitted once: it is not held to it)."""
        if not retry and self._at_running_share(fairness, weight):
            return None
        lease = self._place(session, weight, fairness)
        if lease is not None:
            lease.fairness = fairness
            self._waiters.served(lease.owner)
        return lease

    def _has_room(self, session: str | None, weight: int, fairness: Fairness | None) -> bool:
        """Whether ``_place`` would find a slot now (without taking it)."""
        pinned = self._pinned(session, fairness)
        if pinned is not None and pinned.state is State.READY and not pinned.outlier.ejected:
            return pinned.fits(weight)
        return any(r.fits(weight) for r in self.replicas)

    def _pinned(self, session: str | None, fairness: Fairness | None) -> Replica | None:
        """The replica ``session`` of ``fairness``'s account is pinned to, if any."""
        if session is None:
            return None
        return self._sessions.get(fairness.id if fairness is not None else None, session)

    def _place(self, session: str | None, weight: int, fairness: Fairness | None) -> Lease | None:
        now = time.monotonic()
        tenant = fairness.id if fairness is not None else None
        if session is not None:
            pinned = self._sessions.get(tenant, session)
            if pinned is not None and pinned.state is State.READY and pinned.outlier.takes(now):
                self._sessions.touch(tenant, session)
                return pinned.lease(session, weight) if pinned.fits(weight) else None
        candidates = [r for r in self.replicas if r.fits(weight)]
        if not candidates:
            return None
        # Ejected replicas (outlier.py) are left out while one in rotation can serve; a model
        # whose every ready replica is ejected still uses them rather than refusing requests.
        taking = [r for r in candidates if r.outlier.takes(now)]
        if taking:
            candidates = taking
        elif any(r.state is State.READY and not r.outlier.ejected for r in self.replicas):
            return None  # the replicas in rotation are only busy: wait for them
        fewest = min(r.outstanding for r in candidates)
        best = [r for r in candidates if r.outstanding == fewest]
        chosen = best[next(self._turn) % len(best)]
        if session is not None:
            self._sessions.pin(tenant, session, chosen)
        return chosen.lease(session, weight)

    def _serving(self) -> bool:
        """True once some replica is ready: only then are requests really waiting for slots
        that others hold (``rejectIfBusy`` refuses); while every replica is still loading, a
        request waits for the first one like any other."""
        return any(r.state is State.READY for r in self.replicas)

    def _hopeless(self) -> bool:
        """No replica can take a request now or soon: each failed its latest start (FAILED, or
        retrying: a request must not wait through the round, as SGLang's router answers one
        with no healthy worker), is stopping, is an attached server that stopped answering
        (nothing here can restart it), or is down for good (the pool is shutting down)."""
        return bool(self.replicas) and all(
            r.start_failing or r.stopping or r.unreachable or r.retired for r in self.replicas
        )

    def _hopeless_error(self) -> errors.UpstreamFailed:
        failing = [r for r in self.replicas if r.start_failing and r.start_failure]
        if failing and len(failing) == len(self.replicas):
            # Nothing can start: the configuration is wrong, not the capacity (3043, not 3040).
            # The latest failure is the one to tell.
            replica = max(failing, key=lambda r: r.start_failure.at if r.start_failure else 0)
            failure = replica.start_failure
            assert failure is not None  # invariant: filtered above
            now = time.monotonic()
            if replica.settings.operator_detail:
                detail = failure.describe(replica.short_name, replica.config, now)
            else:
                detail = failure.describe_briefly(replica.short_name, now)
            return errors.model_start_failed(self.model_id, detail)
        unreachable = [r for r in self.replicas if r.unreachable]
        if unreachable:
            replica = unreachable[-1]
            if replica.settings.operator_detail:
                why = replica.last_error
                detail = f"{replica.short_name} at {replica.url} is unreachable ({why})"
            else:
                detail = f"{replica.short_name} is unreachable"
            return errors.model_unavailable(self.model_id, detail)
        retired = [r for r in self.replicas if r.retired]
        if retired:
            replica = retired[-1]
            why = replica.public(replica.last_error) if replica.last_error else None
            detail = "the model pool is shutting down"
            if why is not None and replica.state is State.DEAD:
                detail = f"{replica.short_name} {why} and is not restarted: {detail}"
            return errors.model_unavailable(self.model_id, detail)
        reasons = [r.public(r.last_error) for r in self.replicas if r.last_error]
        detail = reasons[-1] if reasons else "every replica is stopped"
        return errors.model_unavailable(self.model_id, detail)

    def _raise_if_hopeless(self) -> None:
        if self._hopeless():
            raise self._hopeless_error()

    def fail_waiters(self, error: Exception) -> None:
        """The pool is closing: nobody in the queue will be served."""
        for waiter in self._waiters.pop_all():
            if not waiter.future.done():
                waiter.future.set_exception(error)


def _expire(future: asyncio.Future[Lease]) -> None:
    """A waiter's time is up (``ModelGroup.wait``): it hears 3007, unless already served."""
    if not future.done():
        future.set_exception(errors.timed_out())
