"""Listing a Worker's versions (and finding its live one) reads every version's metadata, both
1 MiB rule texts with it: that runs on a thread, never on the loop every tenant is served from
(review18: ~286 ms a list at 30 versions).

The seam wraps the real ``versions`` and ``version`` of the script store and holds the call as
it enters; meanwhile another tenant is answered. Nothing asserts on time: a request not
answered within its client timeout fails the test."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.platform.conftest import RunningPlatform, worker_upload

ANSWER_TIMEOUT_S = 10.0


@pytest.mark.parametrize("route", ["/versions", "/settings", ""])
def test_a_workers_versions_are_read_off_the_event_loop(
    platform: RunningPlatform, route: str
) -> None:
    account, issued = platform.plane.accounts.create_permanent("lister")
    other, other_token = platform.plane.accounts.create_permanent("bystander")
    client = platform.client(issued.token)
    body, ctype = worker_upload()
    base = f"/accounts/{account.id}/workers/scripts/w"
    put = client.put(base, content=body, headers={"content-type": ctype})
    assert put.status_code in (200, 201), put.text
    scripts = platform.plane.scripts
    real = {name: getattr(scripts, name) for name in ("versions", "version")}
    entered, release = threading.Event(), threading.Event()

    def holding(name: str) -> Any:
        def held(*args: Any, **kwargs: Any) -> Any:
            entered.set()
            assert release.wait(60), "the test never released the held call"
            return real[name](*args, **kwargs)

        return held

    for name in real:
        setattr(scripts, name, holding(name))
    try:
        with ThreadPoolExecutor(1) as pool:
            pending: Future[httpx.Response] = pool.submit(client.get, base + route)
            try:
                assert entered.wait(60), "the route never read the versions"
                answered = httpx.get(
                    f"{platform.api}/accounts/{other.id}/workers/scripts",
                    headers={"authorization": f"Bearer {other_token.token}"},
                    timeout=ANSWER_TIMEOUT_S,
                )
                assert answered.status_code == 200, answered.text
                assert not pending.done()  # it really was held all along
            finally:
                release.set()
            done = pending.result(timeout=60)
    finally:
        for name, method in real.items():
            setattr(scripts, name, method)
    assert done.status_code == 200, done.text
