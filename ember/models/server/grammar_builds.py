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
  request for another new spec waits on the event loop for a slot, first come first served,
  holding nothing but its own request. A client sending thousands of distinct schemas makes
  them wait their turn: the server builds ``threads`` at a time and queues ``max_pending``.
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
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ember.errors import BackendError, UserError
from ember.models.constrain.grammar import Grammar
from ember.models.constrain.session import ConstraintSpec, ConstraintViolation, compile_grammar
from ember.models.constrain.vocab import TokenVocabulary

log = logging.getLogger(__name__)

GrammarBuild = Callable[[ConstraintSpec, TokenVocabulary], Grammar]

# One builder thread: builds are pure Python, so under the GIL a second thread would build no
# faster, only interleave two builds with the engine's own Python.
THREADS = 1
MAX_PENDING = 64  # builds queued or running in the executor; later new specs wait for a slot
CAPACITY = 32  # built grammars kept for later requests (each bounded, see GrammarCache)


@dataclass(eq=False)
class _Build:
    spec: ConstraintSpec
    done: asyncio.Future[Grammar]  # on the event loop: the build's outcome
    waiters: int = 0
    starter: asyncio.Task[None] | None = None  # waits for a slot, then submits
    job: concurrent.futures.Future[Grammar] | None = None  # in the executor, once submitted


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
    _ready: OrderedDict[str, Grammar] = field(default_factory=OrderedDict, init=False)
    _builds: dict[str, _Build] = field(default_factory=dict, init=False)
    _waits: dict[str, list[_Wait]] = field(default_factory=dict, init=False)
    _submitted: int = field(default=0, init=False)
    _slots: asyncio.Semaphore | None = field(default=None, init=False)
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

    def cached(self, spec: ConstraintSpec) -> Grammar | None:
        """The spec's grammar if it is built (no waiting)."""
        key = spec.key()
        grammar = self._ready.get(key)
        if grammar is not None:
            self._ready.move_to_end(key)
        return grammar

    async def grammar(self, spec: ConstraintSpec, request_id: str) -> Grammar | None:
        """The spec's grammar, built if need be; ``None`` when the request was aborted
        (``abort``) while it waited. Cancelling the caller ends its wait at once."""
        grammar = self.cached(spec)
        if grammar is not None:
            return grammar
        key = spec.key()
        build = self._builds.get(key)
        if build is None:
            build = self._start(key, spec)
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

    def _start(self, key: str, spec: ConstraintSpec) -> _Build:
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_pending)
        build = _Build(spec, loop.create_future())
        self._builds[key] = build
        build.starter = loop.create_task(self._submit(key, build), name=f"grammar {key[:40]}")
        return build

    async def _submit(self, key: str, build: _Build) -> None:
        assert self._slots is not None
        await self._slots.acquire()
        # No await from here to the submission: a waiter leaving sees either no job (and
        # cancels this task) or the job (and cancels that).
        try:
            job = self._executor.submit(self.build, build.spec, self.vocab)
        except RuntimeError:  # the executor was shut down
            self._slots.release()
            self._builds.pop(key, None)
            if not build.done.done():
                build.done.set_exception(_shut_down())
            return
        build.job = job
        self._submitted += 1
        loop = asyncio.get_running_loop()

        def finished(job: concurrent.futures.Future[Grammar]) -> None:  # the builder's thread
            try:
                loop.call_soon_threadsafe(self._finish, key, build, job)
            except RuntimeError:
                pass  # the event loop is closed: nobody is waiting any more

        job.add_done_callback(finished)

    def _finish(self, key: str, build: _Build, job: concurrent.futures.Future[Grammar]) -> None:
        assert self._slots is not None
        self._slots.release()
        self._submitted -= 1
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
            grammar = job.result()
            self._ready[key] = grammar
            if len(self._ready) > self.capacity:
                self._ready.popitem(last=False)
            build.done.set_result(grammar)
            return
        if not isinstance(error, UserError):
            log.error("building a grammar failed", exc_info=error)
        build.done.set_exception(error)
        if not build.waiters:
            build.done.exception()  # retrieved: nobody is left to raise it

    def _drop(self, key: str, build: _Build) -> None:
        """Nobody waits for ``build`` any more: drop it unless it already runs."""
        if build.job is None:
            assert build.starter is not None
            build.starter.cancel()
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
