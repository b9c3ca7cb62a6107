"""``.dev.vars`` / ``.env``: secrets files read as wrangler reads them (the ``dotenv`` package).

The same file must mean the same secrets under ``wrangler dev`` and ``ember dev``, so the rules
are dotenv's, not a shell's:

- ``KEY=value`` or ``KEY: value``, optionally after ``export``; keys are letters, digits, ``_``,
  ``.`` and ``-``.
- An unquoted value ends at the first ``#`` (the rest of the line is a comment) and is trimmed.
- A value in ``'``, ``"`` or backticks keeps ``#`` and spaces, may span several lines (PEM keys),
  and may be followed by a comment. In double quotes ``\\n`` and ``\\r`` become a newline and a
  carriage return; nothing else is unescaped.

Where dotenv silently skips a line, ember stops with an error naming the line (never its text:
it may hold a secret): a line that is not an entry, or a quote that is never closed.
"""

from __future__ import annotations

import re
from pathlib import Path

from ember.errors import ConfigError

_ENTRY = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z0-9_.-]+)(?:[ \t]*=[ \t]*|:[ \t]+)(.*)")
_AFTER_QUOTE = re.compile(r"[ \t]*(?:#.*)?")
_QUOTES = "'\"`"


def parse_dotenv(path: Path) -> dict[str, str]:
    """The ``KEY: value`` pairs of a secrets file; ConfigError naming the line if malformed."""
    return parse_dotenv_text(path.read_text(encoding="utf-8"), str(path))


def parse_dotenv_text(text: str, fname: str) -> dict[str, str]:
    """``parse_dotenv`` of ``text`` (``fname`` names it in errors)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    values: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        index += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ENTRY.fullmatch(line)
        if match is None:
            raise ConfigError(fname, f"line {number}", "<not shown>", "KEY=value")
        key, rest = match.group(1), match.group(2)
        if rest and rest[0] in _QUOTES:
            quoted = _quoted(lines, index, rest, fname, number)
            if quoted is not None:
                values[key], index = quoted
                continue
        values[key] = rest.split("#", 1)[0].strip()
    return values


def _quoted(
    lines: list[str], index: int, rest: str, fname: str, number: int
) -> tuple[str, int] | None:
    """(value, index of the next line) of a quoted value starting ``rest``; None when text other
    than a comment follows the closing quote (dotenv then reads the line as unquoted)."""
    quote, text = rest[0], rest[1:]
    end = _closing(text, quote)
    while end < 0 and index < len(lines):
        text += "\n" + lines[index]
        index += 1
        end = _closing(text, quote)
    if end < 0:
        raise ConfigError(
            fname,
            f"line {number}",
            f"a value opened with {quote} and never closed",
            f"a closing {quote} (a quoted value may span lines)",
        )
    if not _AFTER_QUOTE.fullmatch(text[end + 1 :]):
        return None
    value = text[:end]
    if quote == '"':
        value = value.replace("\\n", "\n").replace("\\r", "\r")
    return value, index


def _closing(text: str, quote: str) -> int:
    """Index of the first ``quote`` in ``text`` not escaped by a backslash, or -1."""
    start = 0
    while (found := text.find(quote, start)) >= 0:
        if found == 0 or text[found - 1] != "\\":
            return found
        start = found + 1
    return -1
