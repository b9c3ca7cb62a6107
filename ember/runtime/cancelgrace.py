"""What one request that ignores its cancellation costs the other requests of its isolate.

A request is cancelled (its client left, or it ran past its wall-time limit) and its isolate is
given ``CANCEL_GRACE_S`` to end it. If the isolate has not, either its event loop is blocked (a
handler sleeping or spinning synchronously: nothing else in it can run either) or the handler
caught the cancellation and went on. Workers promises no more to the other requests of an isolate
that is reset than an error (an isolate may serve many requests, and limits such as memory are
per isolate), and ember used to kill the isolate at once, answering every other request in flight
with the culprit's own "exceeded wall time limit".

Now: alone in its isolate, the request's isolate is killed as before. With others in flight, if
the isolate is still alive (it sent frames late in the grace: its loop runs), the request is
abandoned (no more binding calls for it), the isolate takes no new requests (a fresh one does) and
is closed once the others finish, each still bound by its own wall limit (CPU is counted per
isolate, so an abandoned handler that keeps spinning still ends it for all). If it is silent
(a blocked loop; or, unavoidably, one whose other requests all wait quietly, on a model say:
without a probe of the isolate ember cannot tell them apart, and a blocked one would hold them
to their own wall limits), it is killed at once, and the others are told why
(``limits.isolate_restarted``), not a wall-time error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.runtime import limits as L
from ember.runtime.lifecycle import State

if TYPE_CHECKING:
    from ember.runtime.inflight import InFlight
    from ember.runtime.process import IsolateProcess


def ignored_cancellation(request: InFlight, reads_at_cancel: int) -> None:
    """``request`` was cancelled and its grace passed (``reads_at_cancel``: the isolate's reads,
    ``IsolateProcess.reads``, when the cancel was sent or, polled, half the grace later)."""
    process = request.process
    reason = f"request {request.rid} ignored cancellation"
    others = [r for r in process.inflight.values() if r is not request and not r.abandoned]
    if not others:
        process.kill(L.WALL_EXCEEDED, reason)
        return
    if process.reads > reads_at_cancel and process.state in (State.READY, State.DRAINING):
        request.abandoned = True
        request.counters = None  # its binding calls are refused from now on
        process.hooks.recycle(process, f"{reason}; its other requests may finish")
        return
    request.finish()  # (already answered: its outcome stays its own)
    process.kill(L.isolate_restarted(request.rid), reason)


def after_finish(process: IsolateProcess) -> None:
    """A request ended: a draining isolate left with abandoned requests only is closed now."""
    if process.state is State.DRAINING and all(r.abandoned for r in process.inflight.values()):
        for request in list(process.inflight.values()):
            request.finish()  # the last one closes the drained isolate
