"""``ModelPool``: model ids -> replica groups; the one place requests enter the model side.

    pool = ModelPool(config, progress=print)
    await pool.start()                         # eager (ember serve); lazy pools start on demand
    answer = await pool.post(model_id, "/v1/chat/completions", body, RequestOptions())
    events = await pool.stream(model_id, "/v1/chat/completions", body, RequestOptions())
    pool.begin_shutdown()                      # serve on, but start no replica again
    pool.interrupt(reason)                     # end open streams and queued requests now
    await pool.aclose()                        # drain in-flight requests, stop every replica

A request takes a slot (``admission``), goes to its replica (``upstream``), and gives the slot
back when its answer is complete, failed or abandoned. A request that could not even connect
(the replica died a moment ago) is sent to another replica; one that reached a replica is never
sent twice (it may have had effects, and its tokens were already streaming).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from ember.errors import ModelNotFound
from ember.models.catalog import Catalog, ModelOverride, default_catalog, with_overrides
from ember.models.pool import errors
from ember.models.pool.admission import ModelGroup
from ember.models.pool.config import ModelServing, PoolConfig
from ember.models.pool.fair import Fairness
from ember.models.pool.launch import ModelSource, family_parsers, free_port, launch_command
from ember.models.pool.lease import TIMED_OUT, Lease
from ember.models.pool.pooled_stream import PooledStream
from ember.models.pool.replica import Replica, State
from ember.models.pool.status import PoolStatus
from ember.models.pool.upstream import (
    ReplicaAnswer,
    ReplicaUnreachable,
    open_events,
    post_json,
)
from ember.models.pool.wire import WirePool

MAX_CONNECT_RETRIES = 3


def stderr_progress(line: str) -> None:
    """The default progress sink: one line on stderr per loading step."""
    sys.stderr.write(f"[ember] {line}\n")
    sys.stderr.flush()


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """Per-request routing: session affinity, fail-fast, extra headers for the replica."""

    session: str | None = None
    reject_if_busy: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None  # None: the pool's request_timeout_s
    fairness: Fairness | None = None  # whose request: its account's cap and turn (fair.py)
    # Sent as the body's ``cache_salt``: the replica shares prefix-cache pages only between
    # requests of one salt (the gateway gives each tenant its own: bindings/ai/cache_salt.py).
    cache_salt: str | None = None


class ModelPool(PoolStatus):
    """See the module docstring."""

    def __init__(
        self,
        config: PoolConfig | None = None,
        *,
        progress: Callable[[str], None] = stderr_progress,
        catalog: Catalog | None = None,
        python: str = sys.executable,
    ) -> None:
        self.config = config or PoolConfig()
        self.progress = progress
        self.python = python
        self._base_catalog = catalog or default_catalog()
        self.catalog = _catalog(self._base_catalog, self.config)
        self.http = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=4096, max_keepalive_connections=512),
            timeout=httpx.Timeout(None, connect=5.0),
        )
        self.wire = WirePool()  # streams: the hot path (see wire.py)
        self._groups: dict[str, ModelGroup] = {}
        self._max_contexts: dict[str, int] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closing = False
        self._streams: set[PooledStream] = set()  # open ones, for ``interrupt``

    # -- models ---------------------------------------------------------------------------------

    def model_ids(self) -> list[str]:
        """Every id the pool can serve (catalog plus configured ones, or configured only)."""
        if not self.config.serves_unconfigured:
            return list(self.config.models)
        ids = self.catalog.ids()
        return ids + [m for m in self.config.models if m not in ids]

    def knows(self, model_id: str) -> bool:
        """``model_id in model_ids()``, without building the list (checked on every request)."""
        if model_id in self.config.models:
            return True
        return self.config.serves_unconfigured and model_id in self.catalog

    def group(self, model_id: str) -> ModelGroup:
        """The replica group of ``model_id`` (made on first use); ModelNotFound if unknown."""
        group = self._groups.get(model_id)
        if group is not None:
            return group
        if self._closing:
            raise errors.model_unavailable(model_id, "the model pool is shutting down")
        serving = self.config.serving(model_id)
        if model_id not in self.model_ids() or (
            model_id not in self.catalog and not all(r.url for r in serving.replicas)
        ):
            raise ModelNotFound(f"No such model {model_id} or task")
        group = ModelGroup(
            model_id,
            serving.max_queued_requests,
            self.config.settings.queue_timeout_s,
            serving.account_cap(self.config.settings.account_share),
        )
        source = self._source(model_id, serving)
        cpu_replicas = sum(
            1 for r in serving.replicas if r.launched and r.backend == "ember" and r.device == "cpu"
        )
        threads = max(1, (os.cpu_count() or 1) // cpu_replicas) if cpu_replicas > 1 else None
        for index, replica_config in enumerate(serving.replicas):
            command = None
            if replica_config.launched:
                assert source is not None  # invariant: launched replicas need a catalog entry

                def command(rc=replica_config, src=source):  # noqa: ANN202 - a factory
                    return launch_command(
                        rc, src, free_port(), python=self.python, torch_threads=threads
                    )

            group.replicas.append(
                Replica(
                    model_id,
                    index,
                    replica_config,
                    command,
                    self.config.settings,
                    self.http,
                    group.changed,
                    self.progress,
                )
            )
        self._groups[model_id] = group
        return group

    def _source(self, model_id: str, serving: ModelServing) -> ModelSource | None:
        if model_id not in self.catalog:
            return None
        entry = self.catalog.get(model_id)
        tool_parser, reasoning_parser = family_parsers(entry.family, model_id)
        return ModelSource(
            model_id=model_id,
            checkpoint=entry.checkpoint_dir if entry.shipped is None else None,
            family=entry.family,
            tool_call_parser=tool_parser,
            reasoning_parser=reasoning_parser,
            context_window=serving.context_window,
        )

    async def start(self) -> None:
        """Start every configured model's replicas now (``ember serve``; ``start: eager``)."""
        for model_id in self.config.models:
            self.group(model_id).start()

    async def wait_ready(self, model_id: str, timeout: float) -> bool:
        """Wait until one replica of ``model_id`` is ready (tests, ``ember ai run``)."""
        group = self.group(model_id)
        group.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if any(r.state is State.READY for r in group.replicas):
                return True
            if all(r.state is State.FAILED for r in group.replicas):
                return False
            await asyncio.sleep(0.05)
        return False

    # -- requests -------------------------------------------------------------------------------

    async def _lease(
        self,
        model_id: str,
        options: RequestOptions,
        body: Mapping[str, object],
        retry: bool,
        deadline: float,
    ) -> Lease:
        """A slot for the request, waiting for one in the queue until ``deadline`` at most."""
        group = self.group(model_id)
        admitted = group.acquire_now(
            options.session,
            options.reject_if_busy,
            sequences(body),
            retry=retry,
            fairness=options.fairness,
        )
        if isinstance(admitted, Lease):
            return admitted
        # Every slot is taken: it holds its place in the queue, under the deadline.
        loop = asyncio.get_running_loop()
        return await group.wait(admitted, max(0.0, deadline - loop.time()))

    async def post(
        self, model_id: str, path: str, body: Mapping[str, object], options: RequestOptions
    ) -> ReplicaAnswer:
        """A non-streaming request; its answer (any status) or an ``errors`` exception."""
        timeout = options.timeout or self.config.settings.request_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for attempt in range(MAX_CONNECT_RETRIES + 1):
            lease = await self._lease(model_id, options, body, attempt > 0, deadline)
            lease.timeout = timeout
            # The deadline fails the lease, which cuts the connection (the replica hears the
            # request is gone) and frees the slot, whatever the caller does meanwhile: a
            # timer of its own rather than a cancellation of the caller's task.
            expiry = loop.call_later(max(0.0, deadline - loop.time()), lease.fail, TIMED_OUT)
            try:
                return await post_json(
                    self.http, lease, path, self._body(body, lease, options), options.headers
                )
            except ReplicaUnreachable as exc:
                if attempt == MAX_CONNECT_RETRIES:
                    raise errors.replica_failed(model_id, f"no replica answered ({exc})") from None
            except errors.UpstreamFailed:
                if lease.failure == TIMED_OUT:
                    raise errors.timed_out() from None
                raise
            finally:
                expiry.cancel()
                lease.release()
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(
        self, model_id: str, path: str, body: Mapping[str, object], options: RequestOptions
    ) -> PooledStream:
        """A streaming request; its events once the replica accepted it."""
        timeout = options.timeout or self.config.settings.request_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for attempt in range(MAX_CONNECT_RETRIES + 1):
            lease = await self._lease(model_id, options, body, attempt > 0, deadline)
            lease.timeout = timeout
            # The opening is under the deadline too: a replica that takes the request and never
            # answers must not hold it (and its slot) for ever. Failing the lease cuts the
            # connection, so the replica hears the request is gone.
            opening = loop.call_later(max(0.0, deadline - loop.time()), lease.fail, TIMED_OUT)
            try:
                events = await open_events(
                    self.wire, lease, path, self._body(body, lease, options), options.headers
                )
            except ReplicaUnreachable as exc:
                lease.release()
                if attempt == MAX_CONNECT_RETRIES:
                    raise errors.replica_failed(model_id, f"no replica answered ({exc})") from None
                continue
            except errors.UpstreamFailed:
                lease.release()
                if lease.failure == TIMED_OUT:
                    raise errors.timed_out() from None
                raise
            except BaseException:
                lease.release()
                raise
            finally:
                opening.cancel()
            return PooledStream(events, max(0.0, deadline - loop.time()), self._streams)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _body(
        body: Mapping[str, object], lease: Lease, options: RequestOptions
    ) -> Mapping[str, object]:
        """The body with ``model`` as this replica serves it, and the request's cache salt."""
        if "model" in body and body["model"] != lease.replica.served_name:
            body = {**body, "model": lease.replica.served_name}
        if options.cache_salt is not None:
            body = {**body, "cache_salt": options.cache_salt}
        return body

    # -- life cycle -----------------------------------------------------------------------------

    async def configure(self, config: PoolConfig) -> None:
        """Adopt a new config: models whose serving changed are drained and restarted."""
        catalog = _catalog(self._base_catalog, config)  # validate before touching anything
        old = self.config
        self.config, self.catalog = config, catalog
        self._max_contexts.clear()  # checkpoints and windows may have changed
        for model_id in list(self._groups):
            if old.serving(model_id) != config.serving(model_id) or old.settings != config.settings:
                group = self._groups.pop(model_id)
                self.progress(f"{model_id}: configuration changed; restarting its replicas")
                task = asyncio.ensure_future(
                    self._stop_group(group, self.config.settings.drain_timeout_s)
                )
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def _stop_group(self, group: ModelGroup, drain: float) -> None:
        group.fail_waiters(errors.model_unavailable(group.model_id, "the model was reconfigured"))
        await asyncio.gather(*(r.stop(drain) for r in group.replicas), return_exceptions=True)

    def begin_shutdown(self) -> None:
        """Shutdown has begun (``ember serve``'s HTTP drain, which comes before ``aclose``): the
        replicas that are up serve the requests still in flight, but none is started again, nor
        a model's first one, so a replica that dies now is not relaunched only to be stopped;
        its requests, and the ones after, fail with the usual 3040 at once."""
        self._closing = True
        for group in self._groups.values():
            for replica in group.replicas:
                replica.last_run()

    def interrupt(self, reason: str) -> int:
        """End every open stream and queued request now with a 3040 saying ``reason`` (``ember
        serve``'s drain ran out: a stream then ends with an error event, not cut mid-event).
        Returns how many streams it ended."""
        for group in self._groups.values():
            group.fail_waiters(errors.model_unavailable(group.model_id, reason))
        streams = list(self._streams)
        for stream in streams:
            stream.interrupt(reason)
        return len(streams)

    async def aclose(self, drain: bool = True) -> None:
        """Refuse new requests, let in-flight ones finish (``drain_timeout_s``), stop replicas."""
        self._closing = True
        timeout = self.config.settings.drain_timeout_s if drain else 0.0
        groups, self._groups = list(self._groups.values()), {}
        await asyncio.gather(*(self._stop_group(g, timeout) for g in groups), *list(self._stopping))
        await self.http.aclose()
        self.wire.close()


def _catalog(base: Catalog, config: PoolConfig) -> Catalog:
    overrides = {
        model_id: ModelOverride(serving.checkpoint, serving.context_window)
        for model_id, serving in config.models.items()
        if serving.checkpoint is not None
    }
    return with_overrides(overrides, base) if overrides else base


def sequences(body: Mapping[str, object]) -> int:
    """The sequences a replica runs for ``body``: its ``n`` choices (OpenAI's field, or SGLang's
    ``sampling_params.n``), 1 when it asks for one or says nothing valid (the replica refuses
    what is invalid)."""
    params = body.get("sampling_params")
    n = params.get("n") if isinstance(params, Mapping) else body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 128:
        return n
    return 1
