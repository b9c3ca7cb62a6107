"""One record per AI call for the operator's log (``ember serve --log-requests``).

The gateway reports each call it answers or refuses to ``AIGateway.on_call`` as an ``AICall``:
who for (the ``Tenant``: its account, and its worker for a worker's ``env.AI``), the model asked
for, the status and Workers AI code (0 for an answer), the tokens in and out, the request id
(``cf-ai-req-id``; empty when the call was refused before it got one) and how long it took. A
streamed answer is reported when its stream ends (or fails, or is closed: ``tapped_stream.py``),
with the usage of its final event. The same record for every front: ``env.AI.run``, REST
``ai/run`` and ``/ai/v1``, and for a call a front refuses before the gateway runs it (its body,
its ``options``), which the front reports through ``AIGateway.refusal``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ember.bindings.ai.answer import AIAnswer
from ember.bindings.ai.tapped_stream import TappedStream, Tokens, tokens_of
from ember.bindings.ai.tenant import Tenant


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


# ``report(tokens, milliseconds, code)``: code 0 for an answer, else the Workers AI code of the
# failure a stream ended with after its 200 went out (``TappedStream.failure_code``).
Report = Callable[[Tokens, float, int], None]


def when_done(answer: AIAnswer, started: float, report: Report) -> None:
    """Call ``report`` once ``answer`` is complete: now for JSON, at the end of its stream for
    a stream."""
    if answer.stream is None:
        report(tokens_of(answer.body or b""), (time.monotonic() - started) * 1000, 0)
    else:
        answer.stream = _ReportedStream(answer.stream, started, report)


class _ReportedStream(TappedStream):
    """A stream passed through unchanged, reported once at its end, failure or ``aclose``."""

    def __init__(self, chunks: AsyncIterator[bytes], started: float, report: Report) -> None:
        super().__init__(chunks)
        self._started = started
        self._report = report

    def finish(self) -> None:
        took = (time.monotonic() - self._started) * 1000
        self._report(tokens_of(self.tail), took, self.failure_code or 0)
