"""``AccountExpiry``: a temporary account's end, as ``ember serve`` keeps it. Its workers' binding
calls are refused from that instant on the control plane's clock, and its timer hands the
account to ``on_expired`` then, waiting again when it fires before the wall clock got there
(the loop's clock is monotonic, the plane's is not); a claimed (forgotten) account never ends."""

from __future__ import annotations

import asyncio

from ember.runtime.deployments.clock import ManualClock
from ember.runtime.platform.expiry import AccountExpiry


def test_calls_are_refused_from_the_end_and_the_timer_stops_the_account() -> None:
    async def main() -> None:
        clock = ManualClock(1_700_000_000.0)
        ended: list[str] = []
        arrived = asyncio.Event()

        async def on_expired(account_id: str) -> None:
            ended.append(account_id)
            arrived.set()

        expiry = AccountExpiry(clock, on_expired)
        expiry.watch("acct", clock.now + 0.2)
        expiry.watch("claimed", clock.now + 0.2)
        expiry.forget("claimed")
        assert expiry.refusal("acct") is None
        await asyncio.sleep(0.4)  # the loop's timer fired, but the plane's clock stood still
        assert ended == [] and expiry.refusal("acct") is None
        clock.advance(0.2)
        refusal = expiry.refusal("acct")
        assert refusal is not None and "expired at 2023-11-14T22:13:20Z" in refusal
        await asyncio.wait_for(arrived.wait(), 10)
        assert ended == ["acct"]
        assert expiry.refusal("claimed") is None
        assert expiry.refusal("never-watched") is None
        expiry.close()

    asyncio.run(main())
