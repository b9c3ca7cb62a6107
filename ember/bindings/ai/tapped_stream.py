"""A streamed AI answer passed through unchanged while what it said is kept for a record.

The operator's ``AI call`` line (``call_log.py``) and a gateway log (``gateway_logs.py``) both
need to know how a stream went once it is over: its size, its first bytes, and the usage of its
final event (in its last ``TAIL_BYTES``). ``TappedStream`` keeps those as the chunks go by and
calls its ``finish`` hook exactly once: when the stream ends, when it is closed (``aclose``,
the client left), or when the stream it wraps raises (then the error goes on to the reader).
A stream that failed midway says so in its last event (``{"errors": [{"code": N, ...}]}`` in
Workers' dialect, ``{"error": {..., "code": N}}`` in OpenAI's), after its 200 went out:
``failure_code`` is that code (or ``STREAM_RAISED`` when the wrapped stream raised), for the
records to tell a stream that failed from one that answered. A hook that raises is logged, never
turned into the reader's error, and ``aclose`` closes the wrapped stream whatever the hook did.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

TAIL_BYTES = 4096  # of a stream: enough to hold its final usage event
_TOKENS = re.compile(rb'"(prompt_tokens|completion_tokens)"\s*:\s*(\d+)')
# The start of a failure event in either dialect, then its code. A model's own text never
# matches: inside an event's JSON its quotes are escaped.
_FAILURE_EVENT = re.compile(rb'data: \{"errors?":')
_CODE = re.compile(rb'"code"\s*:\s*(\d+)')
STREAM_RAISED = 3040  # Workers AI's code for a replica that failed, when the stream raised

log = logging.getLogger(__name__)

Tokens = tuple[int | None, int | None]


def tokens_of(data: bytes) -> Tokens:
    """(prompt tokens, completion tokens) from the last ``usage`` in ``data``, if any."""
    found: dict[bytes, int] = {}
    for name, value in _TOKENS.findall(data):
        found[name] = int(value)
    return found.get(b"prompt_tokens"), found.get(b"completion_tokens")


def failure_code_of(data: bytes) -> int | None:
    """The code of the last failure event in ``data`` (None: it has none)."""
    starts = [m.end() for m in _FAILURE_EVENT.finditer(data)]
    if not starts:
        return None
    code = _CODE.search(data, starts[-1])
    return int(code.group(1)) if code else STREAM_RAISED


class TappedStream(ABC):
    """``chunks`` passed through; ``size``, ``head`` (its first ``head_bytes``) and ``tail``
    (its last ``TAIL_BYTES``) kept for ``finish``, which subclasses define."""

    def __init__(self, chunks: AsyncIterator[bytes], head_bytes: int = 0) -> None:
        self._chunks = chunks
        self._head_bytes = head_bytes
        self.head = bytearray()
        self.tail = b""
        self.size = 0
        self.failure_code: int | None = None  # set before ``finish``: see the module's doc
        self._finished = False

    def __aiter__(self) -> TappedStream:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._finish()
            raise
        except Exception:  # its failure: it is over
            self._finish(raised=True)
            raise
        self.size += len(chunk)
        if len(self.head) < self._head_bytes:
            self.head += chunk[: self._head_bytes - len(self.head)]
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]
        return chunk

    async def aclose(self) -> None:
        try:
            self._finish()
        finally:
            closer = getattr(self._chunks, "aclose", None)
            if closer is not None:
                await closer()

    @abstractmethod
    def finish(self) -> None:
        """The stream is over (called once)."""

    def _finish(self, raised: bool = False) -> None:
        if self._finished:
            return
        self._finished = True
        self.failure_code = STREAM_RAISED if raised else failure_code_of(self.tail)
        try:
            self.finish()
        except Exception:  # a record that could not be made must not cut the answer
            log.exception("recording a finished AI stream failed")
