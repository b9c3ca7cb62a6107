"""JSONC (JSON with comments and trailing commas), as ``wrangler.jsonc`` uses it.

Strips ``//`` and ``/* */`` comments outside strings and commas before ``]`` or ``}``, keeping
every newline so ``json`` reports the original line and column of a later error.
"""

from __future__ import annotations


class JSONCError(ValueError):
    """The text cannot be JSONC (an unterminated comment or string)."""


def strip_jsonc(text: str) -> str:
    """Return plain JSON text equivalent to the JSONC ``text``."""
    out: list[str] = []
    i, n = 0, len(text)
    pending_comma: int | None = None  # index in ``out`` of a comma that may be trailing
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            pending_comma = None
            i = end
        elif ch == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif ch == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JSONCError("unterminated /* comment")
            out.append("\n" * text.count("\n", i, end))
            i = end + 2
        elif ch == ",":
            pending_comma = len(out)
            out.append(ch)
            i += 1
        elif ch in "]}":
            if pending_comma is not None:
                out[pending_comma] = " "
            pending_comma = None
            out.append(ch)
            i += 1
        else:
            if not ch.isspace():
                pending_comma = None
            out.append(ch)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        if text[i] == "\n":
            break
        i += 1
    raise JSONCError(f"unterminated string starting at offset {start}")
