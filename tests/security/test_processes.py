"""Memory and processes: memory bombs, fork bombs, thread floods, exec.

Run under FULL (``guard``) and, where the outcome depends on a layer, under the fallback
profiles too (``fallback_guard``), with the outcome each profile's layers promise.
"""

from __future__ import annotations

import os

from ember.runtime.monitor import process_rss_bytes
from ember.runtime.sandbox import Layer
from tests.security.handlers import handler
from tests.security.platform import Guard, wait_until

MEMORY_BOMB = handler(
    """
    async def attack(request, env):
        return Response(str(len(bytearray(8 << 30))))
    """
)

MEMORY_CREEP = handler(
    """
    async def attack(request, env):
        blocks = []
        while True:
            blocks.append(bytearray(16 << 20))
    """
)

FORK_BOMB = handler(
    """
    import time

    async def attack(request, env):
        forked, error = 0, ""
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError as exc:
                error = f"{type(exc).__name__} errno {exc.errno}"
                break
            if pid == 0:
                time.sleep(5)
                os._exit(0)
            forked += 1
        return report(forked=forked, error=error)
    """
)

SPINNING_GRANDCHILD = handler(
    """
    async def attack(request, env):
        try:
            pid = os.fork()
        except OSError as exc:
            return report(error=f"{type(exc).__name__} errno {exc.errno}")
        if pid == 0:
            while True:
                pass
        return report(child=pid)
    """
)

THREAD_FLOOD = handler(
    """
    import threading

    async def attack(request, env):
        stop = threading.Event()
        started, error = 0, ""
        try:
            for _ in range(5000):
                threading.Thread(target=stop.wait, daemon=True).start()
                started += 1
        except RuntimeError as exc:
            error = str(exc)
        stop.set()
        return report(started=started, error=error)
    """
)

EXEC = handler(
    """
    import subprocess

    async def attack(request, env):
        return report(
            subprocess=outcome(lambda: subprocess.run(["/usr/bin/id"], capture_output=True)),
            execv=outcome(lambda: os.execv("/usr/bin/id", ["id"])),
            posix_spawn=outcome(lambda: os.posix_spawn("/usr/bin/id", ["id"], {})),
        )
    """
)


def _layers(guard: Guard) -> frozenset[Layer]:
    process = guard.platform.supervisor.isolate(guard.platform.canary_id)
    assert process is not None and process.sandbox is not None
    return process.sandbox.applied.layers


def test_allocating_8_gib_fails_at_once_and_the_worker_is_replaced(guard: Guard) -> None:
    attacker = guard.attacker(MEMORY_BOMB)
    before = attacker.warm()
    supervisor_rss = process_rss_bytes(os.getpid())
    reply = attacker.attack("bomb")
    # RLIMIT_DATA turns it into a MemoryError, which the platform answers as its limit error.
    assert (reply.status_code, reply.headers.get("x-ember-error")) == (503, "memory_limit")
    assert process_rss_bytes(os.getpid()) - supervisor_rss < 64 << 20
    attacker.served_again(fresh_from=before)


def test_creeping_memory_is_stopped_near_the_limit(guard: Guard) -> None:
    attacker = guard.attacker(MEMORY_CREEP)
    before = attacker.warm()
    reply = attacker.attack("creep")
    # The supervisor's RSS poll, RLIMIT_DATA (MemoryError) or the cgroup's OOM kill (502).
    allowed = {(503, "memory_limit"), (502, "crashed")}
    assert (reply.status_code, reply.headers.get("x-ember-error")) in allowed, reply.text
    attacker.served_again(fresh_from=before)


def test_fork_bomb_is_refused_and_leaves_nothing(fallback_guard: Guard) -> None:
    guard = fallback_guard
    attacker = guard.attacker(FORK_BOMB)
    attacker.warm()
    reply = attacker.attack("fork")
    assert reply.status_code == 200, reply.text
    result = reply.json()
    if Layer.SECCOMP in _layers(guard):
        assert result == {"forked": 0, "error": "PermissionError errno 1"}
    else:  # the pool uid's RLIMIT_NPROC and the pids cgroup (threads count too)
        assert 0 < result["forked"] < 32 and result["error"] == "BlockingIOError errno 11"
    attacker.served_again()  # the children die with the worker when it is removed (guard)


def test_forked_spinning_grandchild_cannot_outlive_the_worker(fallback_guard: Guard) -> None:
    guard = fallback_guard
    attacker = guard.attacker(SPINNING_GRANDCHILD)
    attacker.warm()
    reply = attacker.attack("grandchild")
    result = reply.json()
    if Layer.SECCOMP in _layers(guard):
        assert result == {"error": "PermissionError errno 1"}
    else:
        # Its CPU is not the worker's (a process clock counts threads, not children); what
        # bounds it is the cgroup's CPU quota and the pid namespace: it dies with the worker.
        assert "child" in result and Layer.PID_NS in _layers(guard)


def test_thread_flood_stops_at_the_process_limit(fallback_guard: Guard) -> None:
    guard = fallback_guard
    attacker = guard.attacker(THREAD_FLOOD)
    attacker.warm()
    reply = attacker.attack("threads")
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["error"] == "can't start new thread"
    assert result["started"] < 32  # RLIMIT_NPROC of the pool uid, pids.max of the cgroup
    attacker.served_again()


def test_exec_and_subprocess_are_refused(fallback_guard: Guard) -> None:
    guard = fallback_guard
    attacker = guard.attacker(EXEC)
    before = attacker.warm()
    reply = attacker.attack("exec")
    if Layer.SECCOMP in _layers(guard):
        assert reply.status_code == 200, reply.text
        result = reply.json()
        for name in ("subprocess", "execv", "posix_spawn"):
            assert result[name].startswith("PermissionError: [Errno 1]"), result
        attacker.served_again()
        return
    # Without seccomp, exec replaces the worker with /usr/bin/id inside its namespaces, as
    # its pool uid: the request fails and the next one gets a fresh worker; nothing survives.
    assert reply.status_code == 502, reply.text
    assert wait_until(before.exited)
    attacker.served_again(fresh_from=before)
