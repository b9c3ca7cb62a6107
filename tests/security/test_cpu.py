"""CPU and time: loops, threads, spin at import, background burn, recursion, sleeping forever.

Each test runs under ``guard``: tenant B writes and serves throughout, and afterwards nothing of
the attacker is left (see ``platform.py``).
"""

from __future__ import annotations

from ember.runtime import events as E
from tests.security.handlers import handler
from tests.security.platform import Guard, wait_until

SPIN = handler(
    """
    async def attack(request, env):
        while True:
            pass
    """
)

SPINNING_THREADS = handler(
    """
    import threading

    def spin():
        while True:
            pass

    async def attack(request, env):
        for _ in range(4):
            threading.Thread(target=spin, daemon=True).start()
        await asyncio.sleep(30)
        return Response("slept")
    """
)

SPIN_AT_IMPORT = """
while True:
    pass
"""

BACKGROUND_BURN = handler(
    """
    import threading

    def burn():
        while True:
            pass

    async def attack(request, env):
        threading.Thread(target=burn, daemon=True).start()
        return Response("started")
    """
)

DEEP_RECURSION = handler(
    """
    def down(depth):
        return down(depth + 1) + 1

    async def attack(request, env):
        sys.setrecursionlimit(10**8)
        return Response(str(down(0)))
    """
)

SLEEP_FOREVER = handler(
    """
    import time

    async def attack(request, env):
        if request.headers.get("x-attack") == "blocking":
            time.sleep(3600)
        await asyncio.sleep(3600)
        return Response("woke")
    """
)


def _is_error(reply: object, status: int, tag: str) -> bool:
    return reply.status_code == status and reply.headers.get("x-ember-error") == tag  # type: ignore[attr-defined]


def test_infinite_loop_is_stopped_at_the_cpu_limit(guard: Guard) -> None:
    attacker = guard.attacker(SPIN)
    before = attacker.warm()
    reply = attacker.attack("spin")
    assert _is_error(reply, 503, "cpu_limit"), reply.text
    assert reply.text.startswith("Worker exceeded CPU time limit.")
    attacker.served_again(fresh_from=before)


def test_spinning_threads_are_summed_into_the_request_cpu(guard: Guard) -> None:
    attacker = guard.attacker(SPINNING_THREADS)
    before = attacker.warm()
    reply = attacker.attack("threads")
    assert _is_error(reply, 503, "cpu_limit"), reply.text
    attacker.served_again(fresh_from=before)


def test_spin_at_import_fails_startup_once_without_a_respawn_storm(guard: Guard) -> None:
    attacker = guard.attacker(SPIN_AT_IMPORT)
    replies = [attacker.client.get("/") for _ in range(5)]
    assert all(_is_error(r, 503, "startup_cpu_limit") for r in replies), replies[0].text
    starts = guard.platform.harness.of_type(E.ExceptionEvent, attacker.id)
    assert len(starts) == 1, "the failed version was started again"
    # The operator (or the author) fixes the code: the same deployment is served again.
    guard.redeploy(attacker, SPIN)
    attacker.served_again()


def test_background_thread_after_the_response_is_not_charged_to_the_next_request(
    guard: Guard,
) -> None:
    attacker = guard.attacker(BACKGROUND_BURN)
    before = attacker.warm()
    reply = attacker.attack("burn")
    assert (reply.status_code, reply.text) == (200, "started")
    # Idle CPU past Limits.idle_cpu_ms: the burning isolate is killed before its next request.
    assert wait_until(before.exited), "the burning worker was left running"
    attacker.served_again(fresh_from=before)
    last = guard.platform.harness.of_type(E.RequestEvent, attacker.id)[-1]
    assert last.outcome == "ok" and last.cpu_ms < 150


def test_deep_recursion_ends_in_a_platform_error(guard: Guard) -> None:
    attacker = guard.attacker(DEEP_RECURSION)
    before = attacker.warm()
    reply = attacker.attack("recurse")
    allowed = {(503, "cpu_limit"), (503, "memory_limit"), (502, "crashed"), (500, "exception")}
    assert (reply.status_code, reply.headers.get("x-ember-error")) in allowed, reply.text
    attacker.served_again(fresh_from=before if reply.status_code != 500 else None)


def test_sleeping_forever_is_cut_at_the_wall_limit(guard: Guard) -> None:
    attacker = guard.attacker(SLEEP_FOREVER)
    before = attacker.warm()
    reply = attacker.attack("async")
    assert _is_error(reply, 504, "wall_limit"), reply.text
    attacker.served_again()  # a cancelled sleep leaves the worker healthy
    blocked = attacker.attack("blocking")  # blocks the worker's event loop: killed
    assert _is_error(blocked, 504, "wall_limit"), blocked.text
    assert wait_until(before.exited), "a worker that ignored cancellation was left running"
    attacker.served_again(fresh_from=before)
