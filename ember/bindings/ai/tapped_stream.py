"""A streamed AI answer passed through unchanged while what it said is kept for a record.

The operator's ``AI call`` line (``call_log.py``) and a gateway log (``gateway_logs.py``) both
need to know how a stream went once it is over: its size, its first bytes, and the usage of its
final event (in its last ``TAIL_BYTES``). ``TappedStream`` keeps those as the chunks go by and
calls its ``finish`` hook exactly once: when the stream ends, when it is closed (``aclose``,
the client left), or when the stream it wraps raises (then the error goes on to the reader).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

TAIL_BYTES = 4096  # of a stream: enough to hold its final usage event
_TOKENS = re.compile(rb'"(prompt_tokens|completion_tokens)"\s*:\s*(\d+)')

Tokens = tuple[int | None, int | None]


def tokens_of(data: bytes) -> Tokens:
    """(prompt tokens, completion tokens) from the last ``usage`` in ``data``, if any."""
    found: dict[bytes, int] = {}
    for name, value in _TOKENS.findall(data):
        found[name] = int(value)
    return found.get(b"prompt_tokens"), found.get(b"completion_tokens")


class TappedStream:
    """``chunks`` passed through; ``size``, ``head`` (its first ``head_bytes``) and ``tail``
    (its last ``TAIL_BYTES``) kept for ``finish``, which subclasses define."""

    def __init__(self, chunks: AsyncIterator[bytes], head_bytes: int = 0) -> None:
        self._chunks = chunks
        self._head_bytes = head_bytes
        self.head = bytearray()
        self.tail = b""
        self.size = 0
        self._finished = False

    def __aiter__(self) -> TappedStream:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._chunks.__anext__()
        except Exception:  # its end (StopAsyncIteration) or its failure: it is over
            self._finish()
            raise
        self.size += len(chunk)
        if len(self.head) < self._head_bytes:
            self.head += chunk[: self._head_bytes - len(self.head)]
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]
        return chunk

    async def aclose(self) -> None:
        self._finish()
        closer = getattr(self._chunks, "aclose", None)
        if closer is not None:
            await closer()

    def finish(self) -> None:
        """The stream is over (called once)."""
        raise NotImplementedError

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            self.finish()
