"""A request's path as the platform's ``new URL(request.url).pathname`` has it.

The asset worker matches ``_redirects`` and ``_headers`` and looks assets up on the parsed
URL's pathname, so ``ember`` does the WHATWG URL parser's path steps for a special scheme on
the path as sent: ``\\`` is a ``/``, ``.`` and ``..`` segments (also as ``%2e``) are resolved,
and what the path percent-encode set holds (controls, space, ``"#<>?`{}``, anything past
``~``) is percent-encoded; an existing ``%XX`` stays as sent. Without the first step,
``/go/\\evil.com`` matched ``/go/* /:splat`` and went out as ``Location: /\\evil.com``, which
browsers follow to evil.com (review14).
"""

from __future__ import annotations

_ENCODE = frozenset(' "#<>?`{}')
_SINGLE = frozenset({".", "%2e"})
_DOUBLE = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})


def url_pathname(path: str) -> str:
    """``path`` (the request's, as sent; bytes as latin-1 characters) as a parsed URL's
    pathname: always starting with ``/``."""
    text = path.replace("\\", "/")
    if text.startswith("/"):
        text = text[1:]
    segments: list[str] = []
    parts = text.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        lowered = part.lower()
        if lowered in _DOUBLE:
            if segments:
                segments.pop()
            if last:
                segments.append("")
        elif lowered in _SINGLE:
            if last:
                segments.append("")
        else:
            segments.append(_encode(part))
    return "/" + "/".join(segments)


def _encode(segment: str) -> str:
    if all(" " < c <= "~" and c not in _ENCODE for c in segment):
        return segment  # the common case: nothing to encode
    out = []
    for char in segment:
        if " " < char <= "~" and char not in _ENCODE:
            out.append(char)
            continue
        code = ord(char)
        raw = bytes([code]) if code <= 0xFF else char.encode("utf-8")
        out.append("".join(f"%{byte:02X}" for byte in raw))
    return "".join(out)
