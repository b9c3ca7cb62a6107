"""Fair share of one model between the accounts that use it: who waits, and who is next.

On ``ember serve`` every account's requests share each model's slots and queue. Served oldest
first, one account that keeps the queue full makes every other account wait behind all of it,
or be refused once the queue is full (walk7's repro 03). Three rules, per model:

- **A cap per account** (``AccountCap``): an account's requests in flight on the model, running
  or queued, past which the next is refused with 3036 (HTTP 429) at once. By default from
  ``ai.pool.account_share`` (0.5 on ``ember serve``): every replica's running slots plus that
  share of the queue, and at most that share of the queue waiting (at least one place).
  Without a running share (below) an account alone on a model can use every slot; the places
  left in the queue stay for the others whoever runs, and fair order below gives each freed
  slot to another waiting account first. An operator's
  ``models.<id>.max_account_requests`` sets the number in flight itself. ``ember dev`` has
  none.
- **A share of the running slots per account** (``Fairness.running_share``; on ``ember serve``
  ``platform.accounts.ai_running_share``, 0.5, and ``platform.temporary.ai_running_share``,
  0.25): past it the account's next request waits (in its part of the queue, above) even with
  slots free, so that however long its requests run (300 slow-read streams of 3000 tokens in a
  walkthrough held all 128 slots; another account's call then waited 107 s), the other
  accounts find slots free. A waiter at its share is passed over, never blocks the queue.
- **Fair order** (``FairQueue``): when a slot frees, it goes to a retried request first (its
  replica was unreachable; it was admitted once and keeps its turn, oldest first); else to the
  account with the fewest sequences running on the model; among equals to the one served
  longest ago (round-robin; one never served first, then the one whose request came first);
  within an account, to its oldest request. So a flood waits behind other accounts' single
  requests, and one account alone is served in arrival order as before.

The account is the request's ``Fairness`` (llm-d's flow control calls it the "fairness id";
vLLM's scheduler policies are FCFS and priority, with no notion of a tenant). Requests
without one (``ember dev`` callers with no account, internal ones) share the ``None`` id and
are never capped.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from ember.models.pool.lease import Lease

MAX_REMEMBERED = 4096  # accounts whose last turn is remembered; the oldest turn is forgotten


@dataclass(frozen=True, slots=True)
class Fairness:
    """Who a request is for: ``id`` shares the model with others (one cap, one turn);
    ``name`` is how a refusal names it (``account abc``); ``running_share``: the part of the
    model's running slots its requests may hold at once (``running_cap``), None for all."""

    id: str
    name: str
    running_share: float | None = None

    def running_cap(self, slots: int) -> int | None:
        """Sequences this account may run at once on a model of ``slots`` slots (at least
        one, rounded down: the rest stays for other accounts however long its requests run)."""
        if self.running_share is None:
            return None
        return max(1, int(self.running_share * slots))


@dataclass(frozen=True, slots=True)
class AccountCap:
    """At most ``maximum`` requests of one account in flight on a model, running or queued,
    and, where ``waiting`` is set, at most that many of them queued; ``why`` says where the
    numbers come from, for the refusal."""

    maximum: int
    why: str
    waiting: int | None = None


@dataclass(eq=False)
class Ticket:
    """A place in the queue, taken in the same step that found no free slot; ``wait`` on it."""

    session: str | None
    future: asyncio.Future[Lease]
    weight: int = 1
    fairness: Fairness | None = None
    retry: bool = False  # its replica was unreachable: it goes before everyone

    @property
    def owner(self) -> str | None:
        return self.fairness.id if self.fairness is not None else None


@dataclass
class FairQueue:
    """The waiting tickets of one model, in arrival order, and each account's last turn."""

    _tickets: list[Ticket] = field(default_factory=list)
    _turns: OrderedDict[str | None, None] = field(default_factory=OrderedDict)

    def __len__(self) -> int:
        return len(self._tickets)

    def __bool__(self) -> bool:
        return bool(self._tickets)

    def __iter__(self) -> Iterator[Ticket]:
        return iter(list(self._tickets))

    def add(self, ticket: Ticket) -> None:
        self._tickets.append(ticket)

    def remove(self, ticket: Ticket) -> None:
        """Raises ValueError when ``ticket`` is not queued."""
        self._tickets.remove(ticket)

    def pop_all(self) -> list[Ticket]:
        tickets, self._tickets = self._tickets, []
        return tickets

    def queued(self, owner: str | None) -> int:
        return sum(1 for ticket in self._tickets if ticket.owner == owner)

    def served(self, owner: str | None) -> None:
        """``owner`` was just given a slot (from the queue or at once): its turn is over."""
        self._turns[owner] = None
        self._turns.move_to_end(owner)
        while len(self._turns) > MAX_REMEMBERED:
            # Forgetting the longest-served account makes it "never served": it was first
            # among equals anyway.
            self._turns.popitem(last=False)

    def order(self, running: Mapping[str | None, int]) -> list[Ticket]:
        """Every waiting ticket, the next to serve first (see the module docstring);
        ``running``: sequences each account has running on the model now."""
        retries = [ticket for ticket in self._tickets if ticket.retry]
        by_owner: dict[str | None, list[Ticket]] = {}
        for ticket in self._tickets:  # arrival order: each account's oldest first
            if not ticket.retry:
                by_owner.setdefault(ticket.owner, []).append(ticket)
        last_turn = {owner: turn for turn, owner in enumerate(self._turns)}
        # A stable sort: accounts equal in both keys stay in the order of their oldest request.
        owners = sorted(by_owner, key=lambda o: (running.get(o, 0), last_turn.get(o, -1)))
        return retries + [ticket for owner in owners for ticket in by_owner[owner]]
