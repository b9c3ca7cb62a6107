"""The loop limit's count (``cf-ew-via``): what a request's subrequests carry, and when the
request itself is past the limit. ``tests/serve/test_loop_limit.py`` runs a worker into it."""

from __future__ import annotations

import pytest

from ember.runtime.worker_loops import MAX_NESTED, loops_left


@pytest.mark.parametrize(
    ("headers", "left"),
    [
        ([], MAX_NESTED),  # from outside: 16 nested invocations may follow
        ([("cf-ew-via", "16")], 15),
        ([("cf-ew-via", "1")], 0),  # this one runs; its subrequests are refused
        ([("cf-ew-via", "0")], -1),  # past the limit: 1019
        ([("cf-ew-via", " 3 ")], 2),
        ([("cf-ew-via", "1000000")], 15),  # a client cannot raise the budget ...
        ([("cf-ew-via", "9" * 400)], 15),  # ... nor make ember parse a huge number
        ([("cf-ew-via", "-1")], MAX_NESTED),  # not a count: as from outside
        ([("host", "x"), ("cf-ew-via", "5"), ("cf-ew-via", "0")], 4),  # the first one counts
    ],
)
def test_loops_left(headers: list[tuple[str, str]], left: int) -> None:
    assert loops_left(headers) == left
