"""What a SyntaxError says about the interpreter, when that can be the cause.

ember runs workers on the Python it is installed in; Cloudflare's Python Workers run 3.12 or
newer. Code written for the platform may use 3.12's syntax (PEP 695 ``type`` statements and
``def f[T]()`` generics, PEP 701 f-strings that reuse their quotes), which an older interpreter
rejects. The note says so only where it can be the reason: the failing line looks like that
syntax, or the project's ``requires-python`` excludes this interpreter. A plain unclosed ``(``
is the author's typo, and a paragraph about Python versions under it only misleads.
"""

from __future__ import annotations

import re
import sys

from ember.requires_python import allows

PLATFORM_PYTHON = (3, 12)
# The failing line of 3.12-only syntax, as 3.11 reports it: a ``type`` alias statement, or a
# ``def`` / ``class`` with a type-parameter list.
_PEP_695 = re.compile(
    r"^\s*(type\s+[A-Za-z_]\w*\s*(\[.*\])?\s*=|(async\s+)?def\s+[A-Za-z_]\w*\s*\[|class\s+[A-Za-z_]\w*\s*\[)"
)


def syntax_hint(
    exc: SyntaxError, requires_python: str | None, version: tuple[int, ...] | None = None
) -> str:
    """The note for ``exc`` ("" when the interpreter cannot be the cause)."""
    version = version or tuple(sys.version_info[:3])
    excluded = _excludes(requires_python, version)
    if not excluded and not (version[:2] < PLATFORM_PYTHON and _newer_syntax(exc)):
        return ""
    return syntax_note(version)


def syntax_note(version: tuple[int, ...]) -> str:
    """Which Python ember runs workers on, and (before 3.12) what does not parse there."""
    note = f"ember runs workers on Python {'.'.join(map(str, version))}"
    if version[:2] < PLATFORM_PYTHON:
        note += (
            " (the interpreter it is installed in); Cloudflare's Python Workers run Python 3.12"
            " or newer, whose syntax, such as PEP 695 `type` statements and `def f[T]()`"
            " generics, or f-strings that reuse their quotes (PEP 701), does not parse here"
        )
    return note + "."


def _newer_syntax(exc: SyntaxError) -> bool:
    line = exc.text or ""
    if _PEP_695.match(line):
        return True
    # PEP 701: before 3.12, an f-string's own quotes, a backslash or a comment inside its
    # braces are errors whose message starts "f-string".
    return (exc.msg or "").startswith("f-string")


def _excludes(requires_python: str | None, version: tuple[int, ...]) -> bool:
    if not requires_python:
        return False
    try:
        return not allows(requires_python, version)
    except ValueError:
        return False  # a specifier this cannot read says nothing
