"""The table /abort_request finds requests in (``answer_ids.py``): which ids name which choices,
and that a ticket leaves it when closed or, never closed, when dropped."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.models.server.answer_ids import AnswerIds


def test_the_ids_of_a_request_and_of_its_choices() -> None:
    table = AnswerIds()
    ticket = table.open("r", "chatcmpl-gw", 3)
    assert table.abort("chatcmpl-gw-2") == ["r-2"]  # a choice's id under the answer id
    assert ticket.aborted(2) and not ticket.aborted(0) and not ticket.aborted(1)
    assert table.abort("r-1") == ["r-1"]  # and under the engine id
    assert not ticket.aborted(0)
    assert table.abort("r-3") == [] and table.abort("chatcmpl-gw-0") == []  # no such choice
    assert table.abort("chatcmpl-gw") == ["r", "r-1", "r-2"]  # the answer's id: every choice
    assert ticket.aborted(0)
    assert table.abort("r_1") == ["r-1"] and table.abort("r_0") == ["r"]  # SGLang's names
    assert table.abort("chatcmpl-gw_1") == [] and table.abort("r_3") == []
    assert table.holds("r") and table.holds("r-2") and table.holds("chatcmpl-gw")
    assert table.holds("r_0") and table.holds("r_2") and table.holds("chatcmpl-gw-1")
    assert not table.holds("r-3") and not table.holds("r_3") and not table.holds("chatcmpl-gw_0")
    ticket.close()
    ticket.close()  # idempotent
    assert len(table) == 0 and not table.holds("r") and table.abort("r") == []


def test_abort_all_marks_every_request_and_one_id_names_all_its_holders() -> None:
    table = AnswerIds()
    first, second = table.open("a", None, 1), table.open("b", "b", 2)
    same = table.open("a", None, 1)  # a duplicate rid (refused later, where it is taken)
    assert not table.holds("a_0")  # one choice: SGLang keeps the rid as it is
    assert table.abort("a") == ["a"] and first.aborted(0) and same.aborted(0)
    assert not second.aborted(0)
    table.abort_all()
    assert second.aborted(0) and second.aborted(1)
    assert len(table) == 3


def test_a_ticket_never_closed_leaves_when_dropped() -> None:
    """An answer whose stream never started (its client left first) drops its ticket
    unclosed: the table must not keep its ids."""
    table = AnswerIds()
    ticket = table.open("r", "cmpl-x", 2)
    assert len(table) == 1
    del ticket
    gc.collect()
    assert len(table) == 0 and not table.holds("r") and table.abort("cmpl-x-1") == []


# Run in a child process: a table whose release takes its lock deadlocks the thread the cyclic GC
# ran in (and leaves that process's GC "collecting" for good), so the hang must not be this
# process's. The child's timeout only detects the hang; nothing here measures time.
_GC_IN_THE_LOCK = r"""
import gc

from ember.models.server.answer_ids import AnswerIds


class CollectingKey(str):
    # A lookup key whose hashing runs a full collection: deterministically, the cyclic GC
    # runs inside the table's lock, as an automatic one may at any allocation there.
    def __hash__(self):
        gc.collect()
        return str.__hash__(self)


def leak_cyclic_ticket(table, rid):
    holder = [table.open(rid, None, 4)]
    holder.append(holder)  # only the cyclic GC frees it (as a frame/traceback cycle would)


def busy_table():
    table = AnswerIds()
    tickets = [table.open(f"live-{i}", f"ans-{i}", 3) for i in range(6)]
    return table, tickets


# 1. A collection at a lookup made under the lock (abort, holds).
for call in ("abort", "holds"):
    table, tickets = busy_table()
    gc.disable()
    leak_cyclic_ticket(table, "cyclic")
    gc.enable()
    if call == "abort":
        assert table.abort(CollectingKey("live-1")) == ["live-1", "live-1-1", "live-1-2"]
    else:
        assert table.holds(CollectingKey("live-2"))
    assert len(table) == 6, len(table)  # the cyclic ticket's ids are gone, the rest stay

# 2. The real GC choosing its moment (review31's sweep): thresholds low enough that an
# automatic collection lands on an allocation made inside the lock of each call.
for threshold in range(1, 40):
    for call in ("abort", "len", "holds", "open", "abort_all"):
        table, tickets = busy_table()
        gc.collect()
        gc.disable()
        leak_cyclic_ticket(table, "cyclic")
        gc.set_threshold(threshold)
        gc.enable()
        try:
            if call == "abort":
                table.abort("live-1")
            elif call == "len":
                len(table)
            elif call == "holds":
                table.holds("live-2")
            elif call == "open":
                tickets.append(table.open("new", "new-ans", 8))
            else:
                table.abort_all()
        finally:
            gc.set_threshold(700, 10, 10)
        gc.collect()
        assert len(table) == len(tickets), (threshold, call, len(table))
print("no deadlock")
"""


def test_a_ticket_the_cyclic_gc_frees_inside_the_lock_does_not_deadlock() -> None:
    """review31: a ticket in a reference cycle is released by the cyclic GC, which runs inside
    whatever allocation triggers it, including one made while the same thread holds the table's
    lock (open, abort, holds, len). Its release must not take that lock."""
    root = Path(__file__).resolve().parents[3]
    env = os.environ | {"PYTHONPATH": str(root)}
    try:
        child = subprocess.run(
            [sys.executable, "-c", _GC_IN_THE_LOCK],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the table deadlocked: a ticket's release re-entered the lock its thread held")
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "no deadlock"
