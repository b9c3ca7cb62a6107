"""One record per AI call for the operator's log (``ember serve --log-requests``).

The gateway reports each call it answers or refuses to ``AIGateway.on_call`` as an ``AICall``:
who for (the ``Tenant``: its account, and its worker for a worker's ``env.AI``), the model asked
for, the status and Workers AI code (0 for an answer), the tokens in and out, the request id
(``cf-ai-req-id``; empty when the call was refused before it got one) and how long it took. A
streamed answer is reported when its stream ends (or is closed), with the usage of its final
event. The same record for every front: ``env.AI.run``, REST ``ai/run`` and ``/ai/v1``, and
for a call a front refuses before the gateway runs it (its body, its ``options``), which the
front reports through ``AIGateway.refusal``.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ember.bindings.ai.answer import AIAnswer
from ember.bindings.ai.tenant import Tenant

TAIL_BYTES = 4096  # of a stream: enough to hold its final usage event
_TOKENS = re.compile(rb'"(prompt_tokens|completion_tokens)"\s*:\s*(\d+)')


@dataclass(frozen=True, slots=True)
class AICall:
    tenant: Tenant
    model: str
    status: int
    code: int
    request_id: str
    tokens_in: int | None
    tokens_out: int | None
    duration_ms: float


CallObserver = Callable[[AICall], None]
Tokens = tuple[int | None, int | None]


def tokens_of(data: bytes) -> Tokens:
    """(prompt tokens, completion tokens) from the last ``usage`` in ``data``, if any."""
    found: dict[bytes, int] = {}
    for name, value in _TOKENS.findall(data):
        found[name] = int(value)
    return found.get(b"prompt_tokens"), found.get(b"completion_tokens")


def when_done(answer: AIAnswer, started: float, report: Callable[[Tokens, float], None]) -> None:
    """Call ``report(tokens, milliseconds)`` once ``answer`` is complete: now for JSON, at the
    end of its stream for a stream."""
    if answer.stream is None:
        report(tokens_of(answer.body or b""), (time.monotonic() - started) * 1000)
    else:
        answer.stream = _ReportedStream(answer.stream, started, report)


class _ReportedStream:
    """A stream passed through unchanged, reported once at its end or ``aclose``."""

    def __init__(
        self, chunks: AsyncIterator[bytes], started: float, report: Callable[[Tokens, float], None]
    ) -> None:
        self._chunks = chunks
        self._started = started
        self._report = report
        self._tail = b""
        self._done = False

    def __aiter__(self) -> _ReportedStream:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._finish()
            raise
        self._tail = (self._tail + chunk)[-TAIL_BYTES:]
        return chunk

    async def aclose(self) -> None:
        self._finish()
        closer = getattr(self._chunks, "aclose", None)
        if closer is not None:
            await closer()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._report(tokens_of(self._tail), (time.monotonic() - self._started) * 1000)
