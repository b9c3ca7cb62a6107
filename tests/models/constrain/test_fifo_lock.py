"""The compile worker's lock serves jobs in the order they came (fifo_lock.py)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from ember.models.constrain.fifo_lock import FifoLock


def _wait_for_waiters(lock: FifoLock, count: int) -> None:
    deadline = time.monotonic() + 30
    while lock.waiting < count:
        assert time.monotonic() < deadline, "the waiter never parked"
        time.sleep(0.001)


def test_a_waiter_is_served_before_the_releaser_takes_it_again() -> None:
    """The starvation a plain lock allows: a thread that releases and at once asks again (one
    busy intake thread after another) must not cut in front of one already waiting."""
    lock = FifoLock()
    order: list[str] = []
    lock.acquire()
    waiter = threading.Thread(
        target=lambda: (lock.acquire(), order.append("waiter"), lock.release())
    )
    waiter.start()
    _wait_for_waiters(lock, 1)
    order.append("busy")
    for _ in range(20):
        lock.release()
        assert lock.acquire(timeout=30)
        order.append("busy")
    lock.release()
    waiter.join(timeout=30)
    assert order[:3] == ["busy", "waiter", "busy"]


def test_threads_take_it_in_arrival_order() -> None:
    lock = FifoLock()
    order: list[int] = []
    lock.acquire()
    threads = []
    for index in range(8):
        thread = threading.Thread(
            target=lambda i=index: (lock.acquire(timeout=60), order.append(i), lock.release())
        )
        thread.start()
        _wait_for_waiters(lock, index + 1)  # parked before the next one comes
        threads.append(thread)
    lock.release()
    for thread in threads:
        thread.join(timeout=30)
    assert order == list(range(8))


def test_a_waiter_that_gives_up_leaves_the_line() -> None:
    lock = FifoLock()
    lock.acquire()
    assert lock.acquire(timeout=0.05) is False
    assert lock.waiting == 0
    got: list[bool] = []
    behind = threading.Thread(target=lambda: got.append(lock.acquire(timeout=30)))
    behind.start()
    _wait_for_waiters(lock, 1)
    lock.release()
    behind.join(timeout=30)
    assert got == [True]  # handed to the one still waiting, not to the one that left
    lock.release()
    assert lock.acquire(timeout=0)  # and free again after
    lock.release()


def test_release_of_a_free_lock_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not held"):
        FifoLock().release()


def test_random_timeouts_never_let_two_in_nor_lose_the_lock() -> None:
    """Fresh random timeouts, some expiring just as the lock is handed over: one holder at a
    time, and the lock is free when everyone is done."""
    lock = FifoLock()
    rng = random.Random()
    inside = 0
    most = 0
    counted = threading.Lock()

    def worker(seed: int) -> None:
        nonlocal inside, most
        local = random.Random(seed)
        for _ in range(60):
            if not lock.acquire(timeout=local.choice([0.0, 0.0005, 0.002, 1.0])):
                continue
            with counted:
                inside += 1
                most = max(most, inside)
            time.sleep(local.choice([0.0, 0.0002, 0.001]))
            with counted:
                inside -= 1
            lock.release()

    threads = [threading.Thread(target=worker, args=(rng.random(),)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert most == 1
    assert lock.waiting == 0
    assert lock.acquire(timeout=0)
