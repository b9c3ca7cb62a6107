"""Each account holds at most its share of ``platform.max_isolates`` (``platform.accounts``
and ``platform.temporary``'s ``isolate_share``), and temporary accounts together at most
``platform.temporary.total_isolate_share``: one tenant's busy isolates cannot leave the others
without any (walk18: five busy workers of one temporary account took the last isolate of a
permanent one, which then got 503 until the attacker let go)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.serve.conftest import (
    BASE_CONFIG,
    ServeProcess,
    answer,
    permanent_account,
    put_worker,
    temporary_account,
)

# A response that starts and then never ends: its isolate stays busy while the client listens.
ENDLESS = """\
import asyncio
from workers import Response


async def on_fetch(request, env):
    async def body():
        yield b"started\\n"
        await asyncio.sleep(3600)

    return Response(body())
"""
BROKEN = "raise RuntimeError('this module does not load')\n"


def _config(max_isolates: int, extra: str = "") -> str:
    return BASE_CONFIG.replace("platform:\n", f"platform:\n  max_isolates: {max_isolates}\n{extra}")


def _deploy(serve: ServeProcess, account: str, workers: dict[str, str]) -> None:
    account_id, token = permanent_account(serve, account)
    with serve.api(token) as api:
        for name, source in workers.items():
            reply = put_worker(api, account_id, name, source)
            assert reply.status_code == 200, reply.text


@contextmanager
def _busy(serve: ServeProcess, host: str) -> Iterator[None]:
    """A request to the worker at ``host`` in flight (its answer started) until the block ends."""
    started, done = threading.Event(), threading.Event()
    status: list[int] = []

    def listen() -> None:
        try:
            with httpx.stream("GET", serve.url + "/", headers={"host": host}, timeout=120) as reply:
                status.append(reply.status_code)
                for _ in reply.iter_lines():
                    started.set()
                    done.wait(120)
                    return
        finally:
            started.set()

    client = threading.Thread(target=listen, daemon=True)
    client.start()
    assert started.wait(60)
    assert status == [200], (host, status)
    try:
        yield
    finally:
        done.set()
        client.join(60)


def _refusal(serve: ServeProcess, host: str) -> str:
    """The answer to a request that must be refused; a worker that started instead (its
    answer never ends) fails the test at once rather than at the client's timeout."""
    with httpx.stream("GET", serve.url + "/", headers={"host": host}, timeout=60) as reply:
        assert reply.status_code == 503, (host, reply.status_code)
        return reply.read().decode()


def _temporary(serve: ServeProcess) -> tuple[str, str, str]:
    """(id, name, token) of a new temporary account."""
    account = temporary_account(serve)["account"]
    return account["id"], account["name"], account["apiToken"]  # type: ignore[index]


def test_a_temporary_account_cannot_take_the_isolates_of_the_others(tmp_path: Path) -> None:
    """walk18's repro at the default shares: with 6 isolates a temporary account holds one
    (10%, at least one) and temporary accounts together one (25%); the permanent account's
    worker keeps being served, and the refusals name the limit."""
    serve = ServeProcess(tmp_path / "state", _config(6))
    try:
        _deploy(serve, "victim", {"quick": answer("quick")})
        assert serve.worker("victim", "quick").status_code == 200
        hostile_id, hostile, token = _temporary(serve)
        with serve.api(token) as api:
            for index in range(5):
                reply = put_worker(api, hostile_id, f"e{index}", ENDLESS)
                assert reply.status_code == 200, reply.text
        with _busy(serve, f"e0.{hostile}.localhost"):
            assert _refusal(serve, f"e1.{hostile}.localhost") == (
                "Worker could not start: this account's workers hold 1 busy isolate, the most "
                "they may (platform.temporary.isolate_share); to run more at once, claim the "
                "account. (error code: 1102)\n"
            )
            # Another temporary account (the same client made it): the temporary accounts'
            # part is taken, so its upload cannot be checked and is refused, not made live.
            other_id, other, other_token = _temporary(serve)
            with serve.api(other_token) as api:
                reply = put_worker(api, other_id, "late", BROKEN)
                assert reply.status_code == 503, reply.text
                error = reply.json()["errors"][0]
                assert error["code"] == 1037, error
                assert "platform.temporary.total_isolate_share" in error["message"], error
                assert "was not deployed" in error["message"], error
                missing = api.get(f"/accounts/{other_id}/workers/services/late")
                assert missing.status_code == 404, missing.text
            # The permanent account is untouched: its worker answers, a new one starts.
            for _ in range(3):
                assert serve.worker("victim", "quick").text.startswith("quick "), "victim"
            _deploy(serve, "newcomer", {"fresh": answer("fresh")})
            assert serve.worker("newcomer", "fresh").text.startswith("fresh ")
        log = serve.output()
        assert (
            "e1." + hostile + ": not started: this account's workers hold 1 busy isolate, the "
            "most they may (platform.temporary.isolate_share: 0.1 of platform.max_isolates 6)"
        ) in log, log[-3000:]
    finally:
        serve.stop()


def test_a_permanent_account_holds_at_most_its_share(tmp_path: Path) -> None:
    """Half of 4 isolates: the account's own least recently used idle isolate makes room for
    its next one (even with the platform below its cap), and with both busy it is refused
    while another account still starts its own."""
    serve = ServeProcess(tmp_path / "state", _config(4, "  accounts: {isolate_share: 0.5}\n"))
    try:
        banner = "isolate shares: a permanent account at most 2, a temporary one 1, temporary "
        assert banner + "accounts together 1 (platform.accounts.isolate_share" in serve.output()
        _deploy(serve, "hog", {"q": answer("q"), "e1": ENDLESS, "e2": ENDLESS})
        _deploy(serve, "other", {"w": answer("w")})
        with _busy(serve, "e1.hog.localhost"):
            assert serve.worker("hog", "q").text.startswith("q ")
            with _busy(serve, "e2.hog.localhost"):
                refused = serve.worker("hog", "q")
                assert refused.status_code == 503, refused.text
                assert refused.text == (
                    "Worker could not start: this account's workers hold 2 busy isolates, the "
                    "most they may (platform.accounts.isolate_share); to run more at once, ask "
                    "the platform's operator to raise platform.accounts.isolate_share in its "
                    "ember.yaml. (error code: 1102)\n"
                )
                assert serve.worker("other", "w").text.startswith("w ")
        log = serve.output()
        stopped = (
            "q.hog: isolate stopped: least recently used of this account's 2 "
            "(platform.accounts.isolate_share)"
        )
        assert stopped in log, log[-3000:]
    finally:
        serve.stop()
