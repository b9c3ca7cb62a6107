"""``AsyncEngine``: the engine loop in a dedicated thread, behind an asyncio API.

The model server calls, from its event loop::

    engine = AsyncEngine(llm_engine)            # starts the engine thread
    async for out in engine.generate("req-1", prompt_ids, StopCriteria(max_tokens=64), params):
        ...                                     # one RequestOutput per step with new tokens
    engine.abort("req-1")                       # or just stop iterating / cancel the task
    engine.abort_all()                          # every open request (SGLang's abort_all)
    engine.shutdown()

Only the engine thread touches the ``LLMEngine``. Requests and aborts reach it through a
thread-safe queue and are applied between steps (an abort frees its pages before the next step).
Outputs go back once per step: one ``call_soon_threadsafe`` per event loop per step, however many
requests advanced, so 64 streams cost one wake-up, not 64.

Requests still being taken in (``expect``) and a burst's stragglers hold the next step back,
within bounds: ``intake_hold.py`` says when and for how long.

A request whose iterator is closed before it finished (the client left) is aborted; its id is
taken until the engine lets it go (``drained``). An error that ends one request
(``KVIntegrityError`` after its retries, ``KVCacheExhausted``) is raised from that request's
iterator only; if the engine loop itself fails, every open request gets a ``BackendError``
naming the cause, and new requests are refused. A loop that lives but finishes no step while it
has work (a wedged step) is a ``stall`` (``heartbeat.py``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable

from ember.errors import BackendError, InvalidModelInput
from ember.models.engine.draining import Drain, DrainingIds
from ember.models.engine.engine_commands import (
    AbortRequest,
    AddRequest,
    Command,
    FlushCache,
    OutputStream,
    StopEngine,
    WakeEngine,
    put_all,
    resolve_flush,
)
from ember.models.engine.engine_types import FlushResult, RequestOutput
from ember.models.engine.heartbeat import Heartbeat, Stall
from ember.models.engine.intake_hold import (
    BURST_GAP_S,
    EXPECT_FOR_S,
    HOLD_MAX_S,
    HOLD_STEPS,
    HoldSettings,
    IntakeHold,
)
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.sampling import SamplingParams


class AsyncEngine:
    def __init__(
        self,
        engine: LLMEngine,
        *,
        name: str = "ember-engine",
        hold_max_s: float = HOLD_MAX_S,
        hold_steps: float | None = HOLD_STEPS,
        expect_for_s: float = EXPECT_FOR_S,
        burst_gap_s: float = BURST_GAP_S,
        on_step: Callable[[], None] | None = None,
    ) -> None:
        """``on_step``: called on the engine thread after each step that produced output (the
        server's periodic stats line)."""
        self.engine = engine
        self._on_step = on_step
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._flushes: list[FlushCache] = []  # engine thread only: waiting for the engine to idle
        self._streams: dict[str, OutputStream] = {}
        self._drains = DrainingIds()  # ids whose client left, until the engine lets them go
        self._lock = threading.Lock()  # guards _streams, _failure and the announcements
        self._failure: BaseException | None = None
        self._intake = IntakeHold(HoldSettings(hold_max_s, hold_steps, expect_for_s, burst_gap_s))
        self._heartbeat = Heartbeat()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the caller's side (any event loop) ----------------------------------------------------

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        stop: StopCriteria | None = None,
        sampling: SamplingParams | None = None,
        *,
        cache_salt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Stream a request's outputs; it is submitted on the first iteration. ``cache_salt``:
        the request shares prefix-cache pages only with requests of the same salt.

        Leaving the loop early (``break``, ``aclose()``, task cancellation) aborts the request.
        """
        try:
            prepared = self.engine.prepare_request(
                prompt_token_ids, stop, sampling, cache_salt=cache_salt
            )
        except BaseException:
            self.forget(request_id)
            raise
        stream = OutputStream(asyncio.get_running_loop(), asyncio.Queue())
        if await self.drained(request_id) == "aborted":
            self.forget(request_id)  # announced (``expect``): no step may wait for it
            return  # aborted while it waited for the id: it never reached the engine
        with self._lock:
            # No longer expected and its command queued in one step for the engine thread: a
            # hold sees the announcement or the command, never neither.
            self._intake.submitted(request_id)
            if self._failure is not None:
                raise BackendError(f"the engine is not running: {self._failure}")
            if request_id in self._streams or request_id in self._drains:
                raise InvalidModelInput("request_id", f"request id {request_id!r} is in use")
            self._streams[request_id] = stream
            self._commands.put(AddRequest(request_id, prepared))
        finished = False
        try:
            while True:
                item = await stream.queue.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                if item.error is not None:
                    finished = True
                    raise item.error
                yield item
                if item.finished:
                    finished = True
                    return
        finally:
            with self._lock:
                self._streams.pop(request_id, None)
                if not finished:
                    self._drains.leave(request_id)
            if not finished:
                self._commands.put(AbortRequest(request_id, left=True))

    async def drained(self, request_id: str) -> Drain:
        """Wait while a request under this id whose client left is still in the engine
        (``draining.py``): "free", "aborted" (an abort of the id came meanwhile) or "busy"."""
        return await self._drains.wait(request_id, lambda: self.failure is not None)

    def in_progress(self, request_id: str) -> bool:
        """Whether a request with this id is submitted and not over: its id is taken."""
        with self._lock:
            return request_id in self._streams

    def expect(self, request_id: str) -> None:
        """A request with this id is being taken in and will be submitted shortly: the next step
        waits for it (at most two steps' time). Thread-safe; ``generate`` or ``forget`` ends the
        wait, and it ends by itself after ``expect_for_s``."""
        self._expect(request_id, arrival=True)

    def _expect(self, key: str, *, arrival: bool) -> None:
        with self._lock:
            self._intake.announce(key, arrival=arrival)

    def forget(self, request_id: str) -> None:
        """The announced request will not come (it was refused); a hold waiting for it ends."""
        self._forget(request_id)

    def _forget(self, key: str) -> None:
        with self._lock:
            announced = self._intake.withdraw(key)
        if announced:
            self._commands.put(WakeEngine())

    def abort(self, request_id: str, *, reason: str = "abort") -> None:
        """End a request (``reason`` "abort", or "stop" for a matched stop string); thread-safe,
        idempotent. Its pages are freed before the engine's next step."""
        if reason == "abort":
            self._drains.mark_aborted([request_id])
        self._commands.put(AbortRequest(request_id, reason))

    def abort_all(self) -> list[str]:
        """End every request this engine is streaming (SGLang's ``abort_all``), as ``abort``
        ends one; returns their ids."""
        self._drains.mark_aborted(None)
        with self._lock:
            request_ids = list(self._streams)
        for request_id in request_ids:
            self._commands.put(AbortRequest(request_id))
        return request_ids

    async def flush_cache(self, timeout_s: float = 0.0) -> FlushResult:
        """Drop the engine's prefix cache, on the engine thread (which owns it), between steps.

        As SGLang's ``/flush_cache``: nothing is flushed while requests are waiting or running;
        with ``timeout_s`` the flush waits up to that long for them to finish (SGLang's
        ``?timeout=``), checked after every step, and otherwise fails at once.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[FlushResult] = loop.create_future()
        with self._lock:
            if self._failure is not None:
                raise BackendError(f"the engine is not running: {self._failure}")
            self._commands.put(FlushCache(loop, future, time.monotonic() + timeout_s))
        return await future

    def shutdown(self, timeout: float | None = 10.0) -> None:
        self._commands.put(StopEngine())
        self._thread.join(timeout)

    @property
    def is_running(self) -> bool:
        return self._thread.is_alive()

    def stall(self, bound_s: float) -> Stall | None:
        """Work waits or runs and no step finished for over ``bound_s`` (``heartbeat.py``)."""
        return self._heartbeat.stall(bound_s)

    @property
    def failure(self) -> BaseException | None:
        """Why the engine loop stopped (a failure or a shutdown), or None while it runs."""
        with self._lock:
            return self._failure

    # -- the engine thread ----------------------------------------------------------------------

    def _apply(self, command: AddRequest | AbortRequest | WakeEngine | FlushCache) -> None:
        engine = self.engine
        if isinstance(command, WakeEngine):
            return
        if isinstance(command, FlushCache):
            self._flushes.append(command)
            self._try_flushes()
            return
        if isinstance(command, AbortRequest):
            engine.abort(command.request_id, reason=command.reason)
            if command.left and not engine.holds(command.request_id):  # never reached it
                self._drains.release(command.request_id)
            return
        with self._lock:
            wanted = command.request_id in self._streams
        if not wanted:
            return  # cancelled before the engine saw it
        try:
            engine.add_prepared(command.request_id, command.request)
        except Exception as error:  # a rejected request fails alone
            self._deliver_error(command.request_id, error)

    def _run(self) -> None:
        engine = self.engine
        try:
            while True:
                idle = block = not engine.has_unfinished()
                if idle:
                    self._heartbeat.rest()
                added: list[str] = []
                while True:
                    try:
                        command = self._commands.get(block=block)
                    except queue.Empty:
                        break
                    if isinstance(command, StopEngine):
                        self._fail_all(BackendError("the engine was shut down"))
                        return
                    self._apply(command)
                    if isinstance(command, AddRequest):
                        added.append(command.request_id)
                    block = not engine.has_unfinished()
                if idle and engine.has_unfinished():
                    self._beat()  # the stall clock starts when work arrives, not at the last step
                    if added:
                        self._sync_with_intake(added)
                if self._intake.may_hold(len(added)) and not self._hold(len(added)):
                    return  # stopped while holding
                started = time.monotonic()
                outputs = engine.step()
                self._beat()
                if outputs:
                    self._intake.last_step_s = time.monotonic() - started
                    self._deliver(outputs)
                    if self._on_step is not None:
                        self._on_step()
                if self._flushes:
                    self._try_flushes()
        except BaseException as error:  # the loop is dead: nobody may wait forever
            self._fail_all(BackendError(f"the engine loop failed: {error!r}"))
            if not isinstance(error, Exception):
                raise

    def _beat(self) -> None:
        self._heartbeat.beat(len(self.engine.scheduler.waiting), len(self.engine.scheduler.running))

    def _sync_with_intake(self, added: list[str]) -> None:
        """Before the first step of a batch formed from idle, let each caller's event loop take
        in what has already arrived: a barrier announced like a request, forgotten by the loop
        two callbacks later (``intake_hold.py`` says why)."""
        with self._lock:
            loops = {id(s.loop): s.loop for r in added if (s := self._streams.get(r)) is not None}
        for loop in loops.values():
            barrier = f"intake-barrier-{id(loop)}-{time.monotonic_ns()}"
            self._expect(barrier, arrival=False)
            try:
                loop.call_soon_threadsafe(loop.call_soon, self._forget, barrier)
            except RuntimeError:  # that loop is closed: nothing to take in
                self._forget(barrier)

    def _hold(self, fresh: int) -> bool:
        """Take in announced requests and a burst's stragglers before the step; False if a stop
        came meanwhile."""
        started = time.monotonic()
        while True:
            now = time.monotonic()
            running = len(self.engine.scheduler.running)  # the waiting ones join the batch
            with self._lock:
                until = self._intake.until(now, fresh, running)
                deadline = started + self._intake.bound(fresh, running)
            if until is None or now >= deadline:
                # A request stops being expected when its command is queued, not applied: the
                # ones submitted since the last wake-up are in the queue, and belong in this step.
                return self._apply_queued()
            try:
                command = self._commands.get(timeout=min(until, deadline) - now)
            except queue.Empty:
                continue
            if isinstance(command, StopEngine):
                self._fail_all(BackendError("the engine was shut down"))
                return False
            self._apply(command)
            if isinstance(command, AddRequest):
                fresh += 1

    def _apply_queued(self) -> bool:
        """Apply every command already queued, without waiting; False if one was a stop."""
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return True
            if isinstance(command, StopEngine):
                self._fail_all(BackendError("the engine was shut down"))
                return False
            self._apply(command)

    def _try_flushes(self) -> None:
        """Answer the flushes waiting for an idle engine: flushed, or failed past their
        deadline (the requests still in are named in the answer)."""
        now = time.monotonic()
        waiting: list[FlushCache] = []
        for flush in self._flushes:
            result = self.engine.flush_cache()
            if result.flushed or now >= flush.deadline:
                resolve_flush(flush.loop, flush.future, result)
            else:
                waiting.append(flush)
        self._flushes = waiting

    def _fail_all(self, failure: BackendError) -> None:
        flushes, self._flushes = self._flushes, []
        for flush in flushes:
            resolve_flush(flush.loop, flush.future, failure)
        with self._lock:
            self._failure = failure
            streams = list(self._streams.values())
        for stream in streams:
            try:
                stream.loop.call_soon_threadsafe(stream.queue.put_nowait, failure)
            except RuntimeError:
                pass  # that event loop is closed

    def _deliver(self, outputs: list[RequestOutput]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[OutputStream, RequestOutput]]] = {}
        with self._lock:
            for output in outputs:
                if output.finished and output.request_id in self._drains:
                    self._drains.release(output.request_id)  # let go: the id is free
                    continue
                stream = self._streams.get(output.request_id)
                if stream is not None:
                    by_loop.setdefault(stream.loop, []).append((stream, output))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(put_all, items)
            except RuntimeError:
                pass  # that event loop is closed: its requests were abandoned

    def _deliver_error(self, request_id: str, error: BaseException) -> None:
        with self._lock:
            stream = self._streams.get(request_id)
        if stream is not None:
            stream.loop.call_soon_threadsafe(stream.queue.put_nowait, error)
