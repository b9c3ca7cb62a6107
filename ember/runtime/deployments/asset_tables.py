"""The asset upload sessions open now, by token, and each account's bookkeeping while it is in
use (``AccountAssets``), under one lock; and the temporary accounts' pool they keep current.

An account's record lives while a call uses it or it holds a session, then is freed: kept for
every account ever seen, memory only grew. What each account's open sessions still expect is
recounted from its own sessions (at most ``MAX_OPEN_SESSIONS``) when one of them changes, and
a temporary account's change moves the pool's total (``asset_pool.py``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ember.runtime.deployments.asset_pool import TemporaryPool
from ember.runtime.deployments.asset_session import (
    MAX_OPEN_SESSIONS,
    AccountAssets,
    Session,
    new_token,
)


class SessionTables:
    """Upload and completion tokens, account records and the pool; every method but ``held``
    is called with ``lock`` held."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.uploads: dict[str, Session] = {}  # upload token -> session
        self.completed: dict[str, Session] = {}  # completion token -> session
        self.accounts: dict[str, AccountAssets] = {}
        self.pool = TemporaryPool()
        self._serial = itertools.count()
        # (expires, serial, token) of every token added, soonest first: expiring reads only
        # what is due, not every session (a token removed before is skipped when it comes up).
        self._due: list[tuple[float, int, str]] = []
        self._overdue: set[str] = set()  # due, but a script upload is resolving its session

    @contextmanager
    def held(self, account_id: str) -> Iterator[AccountAssets]:
        """The account's record, kept while the caller uses it."""
        with self.lock:
            state = self.accounts.setdefault(account_id, AccountAssets())
            state.users += 1
        try:
            yield state
        finally:
            with self.lock:
                state.users -= 1
                self._free(account_id, state)

    def next_serial(self) -> int:
        return next(self._serial)

    def add(self, table: dict[str, Session], token: str, session: Session) -> None:
        """Open ``session`` under ``token`` (its account's record is held by the caller)."""
        table[token] = session
        heapq.heappush(self._due, (session.expires, session.serial, token))
        self._trim_due()
        state = self.accounts[session.account_id]
        state.tokens.add(token)
        self.repend(session.account_id)

    def remove(self, table: dict[str, Session], token: str) -> Session | None:
        session = table.pop(token, None)
        if session is not None:
            state = self.accounts.get(session.account_id)
            if state is not None:
                state.tokens.discard(token)
                self.repend(session.account_id)
                self._free(session.account_id, state)
        return session

    def complete(self, session: Session) -> str:
        token = new_token()
        session.completion = token
        self.add(self.completed, token, session)
        return token

    def tokens(self, account_id: str) -> list[str]:
        state = self.accounts.get(account_id)
        return list(state.tokens) if state is not None else []

    def pending(self, account_id: str, skip: str | None = None) -> dict[str, int]:
        """hash -> size of the files the account's open sessions (but ``skip``) still expect."""
        out: dict[str, int] = {}
        # In the order they started, as the recount (``AssetStore.stored_bytes``) reads them:
        # a hash two sessions name with different sizes counts the later one's.
        found = [(s.serial, s) for t in self.tokens(account_id) if (s := self.uploads.get(t))]
        for _, session in sorted(found, key=lambda pair: pair[0]):
            if session is not self.uploads.get(skip or ""):
                out.update(session.sizes)
        return out

    def repend(self, account_id: str) -> None:
        """Recount what the account's sessions still expect (one of them changed)."""
        state = self.accounts.get(account_id)
        if state is None:
            return
        total = sum(self.pending(account_id).values())
        if state.temporary:
            self.pool.add_pending(total - state.pending)
        state.pending = total

    def mark_temporary(self, state: AccountAssets) -> None:
        if not state.temporary:
            state.temporary = True
            self.pool.add_pending(state.pending)

    def leave_pool(self, account_id: str) -> None:
        """The account is no longer temporary (claimed) or is gone (deleted)."""
        state = self.accounts.get(account_id)
        if state is not None and state.temporary:
            state.temporary = False
            self.pool.add_pending(-state.pending)
        self.pool.leave(account_id)

    def oldest(self, account_id: str) -> str | None:
        """The token of the account's oldest session a new one replaces, if it holds
        ``MAX_OPEN_SESSIONS``; one a script upload is resolving stays."""
        held = self.tokens(account_id)
        if len(held) < MAX_OPEN_SESSIONS:
            return None
        free = [(self.by_token(t).serial, t) for t in held if not self.by_token(t).resolving]
        return min(free)[1] if free else None

    def by_token(self, token: str) -> Session:
        return self.uploads.get(token) or self.completed[token]

    def expire(self) -> None:
        now = self.clock()
        while self._due and self._due[0][0] < now:
            self._overdue.add(heapq.heappop(self._due)[2])
        for token in list(self._overdue):
            table = self.uploads if token in self.uploads else self.completed
            session = table.get(token)
            if session is not None and session.expires >= now:  # the clock stepped back
                self._overdue.discard(token)
                heapq.heappush(self._due, (session.expires, session.serial, token))
                continue
            # A session a script upload is resolving stays until it is settled: its manifest
            # and files are the version's being stored.
            if session is None or not session.resolving:
                self._overdue.discard(token)
                self.remove(table, token)

    def _trim_due(self) -> None:
        """Rebuild the heap from the open tokens once it holds over twice as many entries: a
        removed token's entry stayed until it came due, an hour, so 20,000 starts of one
        account kept 20,000 entries for its 8 sessions. Amortised over the pushes since."""
        live = len(self.uploads) + len(self.completed)
        if len(self._due) <= 2 * live + 16:
            return
        self._due = [
            (session.expires, session.serial, token)
            for table in (self.uploads, self.completed)
            for token, session in table.items()
            if token not in self._overdue  # popped already: ``expire`` settles it
        ]
        heapq.heapify(self._due)

    def _free(self, account_id: str, state: AccountAssets) -> None:
        if not state.users and not state.tokens and self.accounts.get(account_id) is state:
            del self.accounts[account_id]
