"""Serve a ``Platform`` with uvicorn on one port (what ``ember serve`` runs).

Prints the banner once listening: the address, the state directory, the live deployments with
their URLs. ``port_file`` (tests, benchmarks) receives the bound port once the server listens.

On SIGTERM/SIGINT it stops listening, tells the model pool that shutdown has begun (a replica that
dies during the drain is not relaunched: ``Platform.begin_ai_shutdown``), and gives the requests in
flight ``drain_timeout_s`` to finish (uvicorn's ``timeout_graceful_shutdown``; without one a stream
kept open by its client would hold the shutdown for ever), saying how many it waits for and how
many it cut. When that time runs out, the AI streams still open are ended first
(``Platform.interrupt_ai_streams``: an error event and ``[DONE]``, the way a replica's death ends
one), and the requests carrying them get up to ``STREAM_END_GRACE_S`` more to send those last
events and complete their responses; what is still running then is cut (a worker's own endless
stream, say).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ember.listen import bind
from ember.runtime.connguard import (
    ConnectionGate,
    ConnectionLimits,
    RateLimitedLog,
    accept_error_handler,
)
from ember.runtime.http import ResponseAborted
from ember.runtime.platform.app import Platform
from ember.runtime.platform.websocket import TolerantWebSocketProtocol

DEFAULT_DRAIN_TIMEOUT_S = 30.0  # the model pool's default drain_timeout_s (see cli/serve.py)
# After the drain ran out, for AI streams to deliver their final error event: a few hops on the
# loopback (gateway -> isolate -> router), unless a client does not read.
STREAM_END_GRACE_S = 5.0
SHUTTING_DOWN = "the platform is shutting down"  # the error event's reason


def _stderr(line: str) -> None:
    import sys

    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _requests(count: int) -> str:
    return f"{count} request" + ("" if count == 1 else "s")


async def serve(
    platform: Platform,
    host: str,
    port: int,
    *,
    port_file: Path | None = None,
    on_ready: Callable[[str], None] | None = None,
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
    say: Callable[[str], None] = _stderr,
    metrics: tuple[str, int] | None = None,
    limits: ConnectionLimits | None = None,
) -> None:
    """Serve until uvicorn is told to stop (SIGINT/SIGTERM), then shut the platform down.
    ``metrics``: the (host, port) of a second listener that answers only ``GET /metrics``.
    ``limits``: request-head deadline, keep-alive and connection caps (``connguard.py``)."""
    import uvicorn

    from ember.runtime.httphead import BoundedHeadProtocol

    limits = limits or ConnectionLimits()
    loop = asyncio.get_running_loop()
    log = RateLimitedLog(lambda line: say(f"ember serve: {line}"), loop.call_later)
    # One line per interval for a flood of failed accepts, not asyncio's traceback per attempt.
    loop.set_exception_handler(accept_error_handler(log, loop.get_exception_handler()))
    gate = ConnectionGate(limits, log)
    platform.http_refusals = gate.refusals  # ember_http_refusals_total
    config = uvicorn.Config(
        platform,
        host=host,
        port=port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing in front of it whose headers to trust
        # 431 past 128 KiB of request head, 408 past its deadline, caps on connections
        # (runtime/httphead.py, runtime/connguard.py)
        http=functools.partial(BoundedHeadProtocol, gate=gate),
        timeout_keep_alive=limits.keepalive_timeout_s,
        server_header=False,
        ws=TolerantWebSocketProtocol,
        timeout_graceful_shutdown=drain_timeout_s,
    )
    logging.getLogger("uvicorn.error").addFilter(_drop_aborted_responses)
    listener = bind(host, port)  # first: a taken port fails before the platform starts
    sockets = [listener]
    if metrics is not None:
        metrics_listener = bind(*metrics)
        platform.metrics_port = metrics_listener.getsockname()[1]
        sockets.append(metrics_listener)
    server = _draining_server(
        config, say, platform.interrupt_ai_streams, platform.begin_ai_shutdown
    )
    serving = asyncio.ensure_future(server.serve(sockets=sockets))
    try:
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            bound_host, bound_port = listener.getsockname()[:2]
            shown = "127.0.0.1" if bound_host in ("0.0.0.0", "::") else bound_host
            platform.origin = f"http://{shown}:{bound_port}"
            if on_ready is not None:
                on_ready(platform.origin)
            if port_file is not None:  # last: whoever waits for it also finds the banner
                staging = port_file.with_suffix(".tmp")
                staging.write_text(str(bound_port))
                os.replace(staging, port_file)
        await serving
        if not server.started and platform.startup_error is not None:
            raise platform.startup_error  # e.g. no sandbox wall between tenants: fail closed
    finally:
        if not serving.done():
            server.should_exit = True
            with contextlib.suppress(BaseException):
                await serving
        for socket in sockets:
            socket.close()


def _drop_aborted_responses(record: logging.LogRecord) -> bool:
    # A streamed response cut short on purpose (limit, worker failure) is not a server error,
    # nor is a request the drain deadline cancelled (the drain's own line counted it), nor
    # uvicorn's line about cancelling them, which repeats that line.
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, ResponseAborted | asyncio.CancelledError):
        return False
    return not str(record.msg).startswith("Cancel %s running task(s)")


def _draining_server(
    config: object,
    say: Callable[[str], None],
    interrupt: Callable[[str], int],
    begin: Callable[[], None],
) -> object:
    """A uvicorn Server whose shutdown says what it drains (uvicorn itself logs only at info),
    first tells the model pool that shutdown has begun (``begin``), and ends the open AI streams
    cleanly when the drain runs out (``interrupt``)."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def startup(self, sockets: list | None = None) -> None:
            # uvicorn exits the process when the lifespan startup fails (from inside a task,
            # past every caller); return instead, so ``serve`` raises the platform's reason.
            try:
                await super().startup(sockets)
            except SystemExit:
                self.should_exit = True

        async def shutdown(self, sockets: list | None = None) -> None:
            timeout = self.config.timeout_graceful_shutdown
            count = len(self.server_state.tasks)
            say(f"ember serve: shutting down, draining {_requests(count)} (up to {timeout:g} s)")
            # The pool's own stop comes after this drain (the lifespan's shutdown): until then a
            # replica that died would be relaunched, only to be stopped again.
            begin()
            await super().shutdown(sockets)

        async def _wait_tasks_to_complete(self) -> None:
            # uvicorn cancels this wait when timeout_graceful_shutdown passes, then cancels
            # the request tasks: say so while their count is still known.
            try:
                await super()._wait_tasks_to_complete()
            except asyncio.CancelledError:
                timeout = self.config.timeout_graceful_shutdown
                left = len(self.server_state.tasks)
                say(f"ember serve: drain timed out after {timeout:g} s, closing {_requests(left)}")
                if interrupt(SHUTTING_DOWN):
                    await self._wait_for_streams_to_end()
                raise

        async def _wait_for_streams_to_end(self) -> None:
            # Only the drain's own cancellation reached this task: sleeping here still works.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STREAM_END_GRACE_S
            while self.server_state.tasks and not self.force_exit and loop.time() < deadline:
                await asyncio.sleep(0.05)

    return DrainingServer(config)  # type: ignore[arg-type]
