"""``ReasoningCounter``: the reasoning tokens of an answer, counted on its token ids."""

from __future__ import annotations

import pytest

from ember.models.api.reasoning_tokens import ReasoningCounter

BEGIN, END, SECTION, SPACE = 100, 101, 102, 7


def _count(prefix: str, tokens: list[int], *, section: bool = False, chunks: int = 1) -> int:
    counter = ReasoningCounter.starting(
        prefix,  # type: ignore[arg-type]
        begin=BEGIN,
        ends=(END, SECTION if section else None),
        blank=lambda token: token == SPACE,
    )
    step = max(1, len(tokens) // chunks)
    for start in range(0, len(tokens), step):  # fed in pieces, as engine steps arrive
        counter.feed(tokens[start : start + step])
    return counter.count


@pytest.mark.parametrize(
    ("prefix", "tokens", "section", "expected"),
    [
        ("inside", [1, 2, 3, END, 4, 5], False, 3),  # the template opened <think>
        ("inside", [1, 2, 3], False, 3),  # cut by max_tokens while thinking
        ("inside", [END, 4], False, 0),
        ("optional", [BEGIN, 1, 2, END, 4], False, 2),
        ("optional", [SPACE, BEGIN, 1, END], False, 1),  # blank before <think> is skipped
        ("optional", [4, BEGIN, 1, END], False, 0),  # <think> after text is not reasoning
        ("off", [BEGIN, 1, END], False, 0),
        ("inside", [1, SECTION, 2], True, 1),  # a tool call ends reasoning when tools are on
        ("inside", [1, SECTION, 2], False, 3),  # ...and is just text when they are not
    ],
)
def test_counts_like_the_output_parser_splits(
    prefix: str, tokens: list[int], section: bool, expected: int
) -> None:
    assert _count(prefix, tokens, section=section) == expected
    assert _count(prefix, tokens, section=section, chunks=len(tokens)) == expected


def test_a_model_without_a_think_token_never_counts() -> None:
    counter = ReasoningCounter.starting("optional", begin=None, ends=(END,), blank=bool)
    counter.feed([1, 2, END])
    assert counter.count == 0
