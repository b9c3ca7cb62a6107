"""The table /abort_request finds requests in (``answer_ids.py``): which ids name which choices,
and that a ticket leaves it when closed or, never closed, when dropped."""

from __future__ import annotations

import gc

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
    assert table.holds("r") and table.holds("r-2")
    assert not table.holds("r-3") and not table.holds("chatcmpl-gw")  # an answer id: no engine id
    ticket.close()
    ticket.close()  # idempotent
    assert len(table) == 0 and not table.holds("r") and table.abort("r") == []


def test_abort_all_marks_every_request_and_one_id_names_all_its_holders() -> None:
    table = AnswerIds()
    first, second = table.open("a", None, 1), table.open("b", "b", 2)
    same = table.open("a", None, 1)  # a duplicate rid (refused later, where it is taken)
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
