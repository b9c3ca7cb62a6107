"""Grammars compiled off the engine thread, before their request is admitted to the batch.

Compiling a request's grammar (``constrain.session.compile_grammar``: the node tree, then the
first token mask) takes ~6-26 ms for a schema within today's bounds (1000 enum values), and up
to tens of ms more for the first mask. On the engine thread that stalled every request in the
batch for a step's worth of time or more, and a client sending distinct schemas could keep
stalling everyone. As SGLang's grammar queue and vLLM's grammar compiler do, a request whose
grammar is not built yet waits here, on the server's event loop, while a small executor
builds it; it is submitted to the engine only once its grammar is ready, so the engine never
builds one. A spec already built is answered from the cache at once (``cached``).

The hand-off keeps each grammar on one thread at a time (``Grammar`` is not thread-safe): the
builder thread makes it and computes its first mask, and never sees it again once its future
is done; the event loop only stores and passes the reference; ``ServerSampler`` touches it on
the engine thread from then on. The one object both sides read is the ``TokenVocabulary``,
whose lazily filled caches are safe to fill twice (see ``vocab.py``).

Limits, and what happens past them:

- One build per spec: every request asking for a spec being built waits for the same build.
- At most ``max_pending`` builds are handed to the executor at once (queued or running); a
  request for another new spec waits on the event loop for a slot, holding nothing but its
  own request. Slots go to callers in turn (the caller with the fewest builds in the
  executor first, then round robin; first come first served within one caller), so one
  caller's thousands of distinct schemas wait behind each other, not in front of everybody
  else's: another caller's build starts after at most the builds already handed to the
  executor (review26). A caller is the request's tenant as the AI gateway names it to the
  replica (its ``cache_salt``); requests without one are one caller. ``max_pending`` is kept
  just above ``threads``: builds handed to the executor are past choosing.
- Built grammars are kept for later requests up to ``capacity`` of them and
  ``capacity_bytes`` in all, the least recently used dropped first. A grammar's size is
  measured where it was built (``grammar_size.py``: every object it holds); one larger than
  the whole budget serves the requests that waited for it and is not kept.
- A request that goes away (client gone, ``/abort_request``) stops waiting at once. A build
  nobody waits for any more is dropped if it has not started; one already running finishes
  and is cached (a retry of the same request finds it ready).
- A build that fails unexpectedly fails the requests waiting for it (``ConstraintViolation``,
  naming each request) and is not cached; a schema the build refuses stays the 400 naming its
  field (schemas and regexes are checked when the request is parsed, so this is rare).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ember.errors import BackendError, UserError
from ember.models.constrain.grammar import Grammar
from ember.models.constrain.grammar_size import grammar_bytes
from ember.models.constrain.session import ConstraintSpec, ConstraintViolation, compile_grammar
from ember.models.constrain.vocab import TokenVocabulary

log = logging.getLogger(__name__)

GrammarBuild = Callable[[ConstraintSpec, TokenVocabulary], Grammar]

# One builder thread: builds are pure Python, so under the GIL a second thread would build no
# faster, only interleave two builds with the engine's own Python.
THREADS = 1
# Builds queued or running in the executor: one running, one ready to start. More would be
# served first come first served by the executor, past the turn-taking between callers.
MAX_PENDING = THREADS + 1
CAPACITY = 32  # built grammars kept for later requests
CAPACITY_BYTES = 512 * 2**20  # and the bytes they hold together (grammar_size.py)


@dataclass(eq=False)
class _Build:
    key: str
    spec: ConstraintSpec
    caller: str
    done: asyncio.Future[Grammar]  # on the event loop: the build's outcome
    waiters: int = 0
    job: concurrent.futures.Future[tuple[Grammar, int]] | None = None  # once submitted


@dataclass(eq=False)
class _Wait:
    request_id: str
    aborted: asyncio.Future[None]


@dataclass
class GrammarBuilds:
    """One per model server (see the module docstring). Use it from the server's event loop;
    only ``build`` (the function) runs on the executor's thread."""

    vocab: TokenVocabulary
    build: GrammarBuild = compile_grammar
    threads: int = THREADS
    max_pending: int = MAX_PENDING
    capacity: int = CAPACITY
    capacity_bytes: int = CAPACITY_BYTES
    _ready: OrderedDict[str, tuple[Grammar, int]] = field(default_factory=OrderedDict, init=False)
    _ready_bytes: int = field(default=0, init=False)
    _builds: dict[str, _Build] = field(default_factory=dict, init=False)
    # Builds waiting for a slot, per caller; the first caller is served next (round robin).
    _queued: OrderedDict[str, deque[_Build]] = field(default_factory=OrderedDict, init=False)
    _inflight: dict[str, int] = field(default_factory=dict, init=False)  # per caller
    _waits: dict[str, list[_Wait]] = field(default_factory=dict, init=False)
    _submitted: int = field(default=0, init=False)
    _executor: concurrent.futures.ThreadPoolExecutor = field(init=False)

    def __post_init__(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.threads, thread_name_prefix="ember-grammar"
        )

    @property
    def pending(self) -> int:
        """Distinct specs being built or waiting for a slot."""
        return len(self._builds)

    @property
    def waiting(self) -> int:
        """Requests waiting for a grammar (readable from another thread: a snapshot)."""
        return sum(len(waits) for waits in list(self._waits.values()))

    @property
    def submitted(self) -> int:
        """Builds handed to the executor (queued or running): at most ``max_pending``."""
        return self._submitted

    @property
    def cached_bytes(self) -> int:
        """Bytes held by the grammars kept for later requests (as measured when built)."""
        return self._ready_bytes

    def cached(self, spec: ConstraintSpec) -> Grammar | None:
        """The spec's grammar if it is built (no waiting)."""
        key = spec.key()
        entry = self._ready.get(key)
        if entry is None:
            return None
        self._ready.move_to_end(key)
        return entry[0]

    async def grammar(
        self, spec: ConstraintSpec, request_id: str, caller: str = ""
    ) -> Grammar | None:
        """The spec's grammar, built if need be; ``None`` when the request was aborted
        (``abort``) while it waited. Cancelling the caller ends its wait at once. ``caller``:
        whose turn a new build waits for (see the module docstring)."""
        grammar = self.cached(spec)
        if grammar is not None:
            return grammar
        key = spec.key()
        build = self._builds.get(key)
        if build is None:
            build = self._start(key, spec, caller)
        wait = _Wait(request_id, asyncio.get_running_loop().create_future())
        self._waits.setdefault(request_id, []).append(wait)
        build.waiters += 1
        try:
            await asyncio.wait((build.done, wait.aborted), return_when=asyncio.FIRST_COMPLETED)
            if not build.done.done():
                return None  # aborted
            return self._outcome(build, request_id)
        finally:
            build.waiters -= 1
            waits = self._waits.get(request_id, [])
            if wait in waits:
                waits.remove(wait)
            if not waits:
                self._waits.pop(request_id, None)
            if build.waiters == 0 and not build.done.done():
                self._drop(key, build)

    def abort(self, request_id: str) -> None:
        """End the wait of the request with this id, if it is waiting for its grammar."""
        for wait in self._waits.get(request_id, []):
            if not wait.aborted.done():
                wait.aborted.set_result(None)

    def abort_all(self) -> None:
        for request_id in list(self._waits):
            self.abort(request_id)

    def shutdown(self) -> None:
        """Stop the builder: queued builds are dropped (their requests fail), a running one
        finishes on its thread. Callable from any thread."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the build's life --------------------------------------------------------------------

    def _start(self, key: str, spec: ConstraintSpec, caller: str) -> _Build:
        build = _Build(key, spec, caller, asyncio.get_running_loop().create_future())
        self._builds[key] = build
        self._queued.setdefault(caller, deque()).append(build)
        self._pump()
        return build

    def _pump(self) -> None:
        """Hand queued builds to the executor while it has slots, callers taking turns."""
        while self._submitted < self.max_pending and self._queued:
            # The caller with the fewest builds in the executor; among those, the one served
            # least recently (a caller goes to the back of the order once served).
            caller = min(self._queued, key=lambda c: self._inflight.get(c, 0))
            queue = self._queued[caller]
            build = queue.popleft()
            if queue:
                self._queued.move_to_end(caller)
            else:
                del self._queued[caller]
            self._submit(build)

    def _measured(self, spec: ConstraintSpec) -> tuple[Grammar, int]:  # the builder's thread
        grammar = self.build(spec, self.vocab)
        return grammar, grammar_bytes(grammar)

    def _submit(self, build: _Build) -> None:
        try:
            job = self._executor.submit(self._measured, build.spec)
        except RuntimeError:  # the executor was shut down
            if self._builds.get(build.key) is build:
                del self._builds[build.key]
            if not build.done.done():
                build.done.set_exception(_shut_down())
                if not build.waiters:
                    build.done.exception()  # retrieved: nobody is left to raise it
            return
        build.job = job
        self._submitted += 1
        self._inflight[build.caller] = self._inflight.get(build.caller, 0) + 1
        loop = asyncio.get_running_loop()

        def finished(job: concurrent.futures.Future[tuple[Grammar, int]]) -> None:
            try:  # on the builder's thread (or here, for a job cancelled before it ran)
                loop.call_soon_threadsafe(self._finish, build.key, build, job)
            except RuntimeError:
                pass  # the event loop is closed: nobody is waiting any more

        job.add_done_callback(finished)

    def _finish(
        self, key: str, build: _Build, job: concurrent.futures.Future[tuple[Grammar, int]]
    ) -> None:
        self._submitted -= 1
        left = self._inflight.pop(build.caller) - 1
        if left:
            self._inflight[build.caller] = left
        try:
            self._settle(key, build, job)
        finally:
            self._pump()

    def _settle(
        self, key: str, build: _Build, job: concurrent.futures.Future[tuple[Grammar, int]]
    ) -> None:
        if self._builds.get(key) is build:
            del self._builds[key]
        if build.done.done():
            return
        if job.cancelled():
            if build.waiters:  # only a shutdown cancels a build someone waits for
                build.done.set_exception(_shut_down())
            else:
                build.done.cancel()
            return
        error = job.exception()
        if error is None:
            grammar, size = job.result()
            self._keep(key, grammar, size)
            build.done.set_result(grammar)
            return
        if not isinstance(error, UserError):
            log.error("building a grammar failed", exc_info=error)
        build.done.set_exception(error)
        if not build.waiters:
            build.done.exception()  # retrieved: nobody is left to raise it

    def _keep(self, key: str, grammar: Grammar, size: int) -> None:
        """Cache a built grammar within ``capacity`` and ``capacity_bytes``."""
        if size > self.capacity_bytes:
            log.warning("a grammar of %d bytes is past the cache's budget: not kept", size)
            return
        self._ready[key] = (grammar, size)
        self._ready_bytes += size
        while len(self._ready) > self.capacity or self._ready_bytes > self.capacity_bytes:
            _, (_, dropped) = self._ready.popitem(last=False)
            self._ready_bytes -= dropped

    def _drop(self, key: str, build: _Build) -> None:
        """Nobody waits for ``build`` any more: drop it unless it already runs."""
        if build.job is None:
            queue = self._queued.get(build.caller)
            if queue is not None and build in queue:
                queue.remove(build)
                if not queue:
                    del self._queued[build.caller]
            if self._builds.get(key) is build:
                del self._builds[key]
            build.done.cancel()
        else:
            build.job.cancel()  # False once running: it finishes and is cached
            # A cancelled job's done callback (_finish) releases its slot and entry.

    @staticmethod
    def _outcome(build: _Build, request_id: str) -> Grammar:
        error = build.done.exception()
        if error is None:
            return build.done.result()
        if isinstance(error, UserError | BackendError):
            raise error
        raise ConstraintViolation(
            f"request {request_id!r}: internal error in its output constraint "
            f"({type(error).__name__}: {error})"
        ) from error


def _shut_down() -> BackendError:
    return BackendError("the model server is shutting down: the request's grammar was not built")
