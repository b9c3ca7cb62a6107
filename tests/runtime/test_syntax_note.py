"""The SyntaxError note about Python 3.12: only where the error could be 3.12's syntax, or the
project's requires-python excludes the interpreter; a plain unclosed ``(`` gets none."""

from __future__ import annotations

import pytest

from ember.runtime.isolate.syntax_note import syntax_hint

OLD = (3, 11, 7)
NEW = (3, 12, 4)


def _error(source: str, version: tuple[int, ...]) -> SyntaxError:
    """The SyntaxError this source raises on ``version`` (made by hand: the interpreter
    running the tests may be either)."""
    error = SyntaxError("invalid syntax", ("worker.py", 1, 1, source.splitlines()[0] + "\n"))
    if "f'" in source or 'f"' in source:
        error.msg = "f-string: unmatched '['"
    if "(" in source and ")" not in source:
        error.msg = "'(' was never closed"
    return error


@pytest.mark.parametrize(
    "source",
    [
        "type Pair = tuple[int, int]",
        "  type Json = dict[str, 'Json']",
        "def first[T](items: list[T]) -> T:",
        "class Box[T]:",
        "async def go[T](x: T) -> T:",
        'greeting = f"{names["en"]}"',
    ],
)
def test_code_that_may_be_312_syntax_gets_the_note_on_an_older_python(source: str) -> None:
    hint = syntax_hint(_error(source, OLD), None, OLD)
    assert "ember runs workers on Python 3.11.7" in hint and "Python 3.12" in hint
    assert syntax_hint(_error(source, NEW), None, NEW) == ""


@pytest.mark.parametrize(
    "source", ["print((1, 2)", "def broken(:", "x = = 1", "typed = 3 +", "return_type = )"]
)
def test_a_plain_mistake_gets_no_note(source: str) -> None:
    assert syntax_hint(_error(source, OLD), None, OLD) == ""
    assert syntax_hint(_error(source, OLD), ">=3.10", OLD) == ""


def test_a_requires_python_that_excludes_the_interpreter_always_gets_it() -> None:
    hint = syntax_hint(_error("print((1, 2)", OLD), ">=3.12", OLD)
    assert "ember runs workers on Python 3.11.7" in hint and "Python 3.12" in hint
    newer = syntax_hint(_error("print((1, 2)", NEW), ">=3.13", NEW)
    assert newer.startswith("ember runs workers on Python 3.12.4")
    assert syntax_hint(_error("print((1, 2)", OLD), "not a specifier", OLD) == ""
