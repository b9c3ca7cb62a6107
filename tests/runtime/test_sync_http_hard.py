"""Sync HTTP clients under the hard cases: the CPU limit firing while another request streams,
a socket the supervisor has not drained yet, a client that leaves, and the wall-time limit.
A real upstream (uvicorn on 127.0.0.1) answers the subrequests."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.runtime.harness import Harness, write_project
from tests.runtime.sync_http_hard_support import LINE_BYTES, WORKER, line
from tests.runtime.upstream import Upstream

HEAD_START = 20  # blocking calls the burning request makes before the streaming one starts


def _get(harness: Harness, worker: str, upstream: Upstream, route: str, **kw: Any) -> Any:
    with harness.client(worker, timeout=kw.pop("timeout", 60)) as client:
        return client.get(f"/{route}", headers={"x-upstream": upstream.url}, **kw)


def test_cpu_limit_in_a_blocking_loop_leaves_a_streaming_neighbour_intact(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    """Request A burns CPU between blocking calls until SIGXCPU stops it; B, on the same
    isolate, streams lines meanwhile (A's pump writes B's frames). B's body must arrive whole
    and in order; A gets the platform's CPU-limit error."""
    worker = harness.deploy(write_project(tmp_path / "cpu", WORKER), limits={"cpu_ms": 400})
    assert _get(harness, worker, upstream, "ok").text == "ok"  # the isolate is up
    first = harness.supervisor.isolate(worker)
    burned: dict[str, httpx.Response] = {}
    marker = len(upstream.seen)
    thread = threading.Thread(
        target=lambda: burned.update(a=_get(harness, worker, upstream, "burn"))
    )
    thread.start()
    harness.wait_for(lambda: upstream.seen[marker:].count("/echo") >= HEAD_START, timeout=30)
    streamed = _get(harness, worker, upstream, "lines")
    thread.join(60)
    a = burned["a"]
    assert (a.status_code, a.headers.get("x-ember-error")) == (503, "cpu_limit"), a.text
    assert a.text.startswith("Worker exceeded CPU time limit.")
    assert streamed.status_code == 200
    body = streamed.content
    count = len(body) // LINE_BYTES
    assert count >= 50  # it went on after A stopped
    assert body == b"".join(line(i) for i in range(count))  # nothing lost, cut or reordered
    assert harness.supervisor.isolate(worker) is not first  # replaced after the limit, as usual


def test_a_blocking_call_on_a_socket_not_yet_drained_waits_for_it_and_loses_nothing(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    """18 MB of log lines fill the isolate's socket before a blocking call: the call writes
    them first (in order), then its own frames, and is answered."""
    worker = harness.deploy(write_project(tmp_path / "busy", WORKER))
    assert _get(harness, worker, upstream, "ok").text == "ok"
    process = harness.supervisor.isolate(worker)
    got = _get(harness, worker, upstream, "busy").json()
    assert got == {"error": None, "answered": "busy"}
    assert _get(harness, worker, upstream, "ok").text == "ok"
    assert harness.supervisor.isolate(worker) is process
    logged = [line for line in harness.console(worker) if line.startswith("busy ")]
    assert logged == [f"busy {i:03d} " + "x" * 60_000 for i in range(300)]


@pytest.mark.parametrize("route", ["never", "trickle"])  # blocked on the head / on the body
def test_a_client_that_leaves_cancels_the_subrequest_and_releases_every_stream(
    harness: Harness, upstream: Upstream, tmp_path: Path, route: str
) -> None:
    worker = harness.deploy(write_project(tmp_path / "leaver", WORKER))
    assert _get(harness, worker, upstream, "ok").text == "ok"
    process = harness.supervisor.isolate(worker)
    assert process is not None
    before = _get(harness, worker, upstream, "streams").json()
    harness.wait_for(lambda: process.mux.open_counts() == (0, 0))
    gone = upstream.gone
    with pytest.raises(httpx.ReadTimeout):
        _get(harness, worker, upstream, route, timeout=1)
    harness.wait_for(lambda: upstream.gone == gone + 1)  # the upstream saw the subrequest end
    harness.wait_for(lambda: process.mux.open_counts() == (0, 0))
    assert _get(harness, worker, upstream, "streams").json() == before
    assert harness.supervisor.isolate(worker) is process


def test_the_wall_limit_ends_a_call_that_is_never_answered(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    worker = harness.deploy(write_project(tmp_path / "wall", WORKER), limits={"wall_ms": 1000})
    assert _get(harness, worker, upstream, "ok").text == "ok"
    process = harness.supervisor.isolate(worker)
    gone = upstream.gone
    late = _get(harness, worker, upstream, "never")
    assert (late.status_code, late.headers.get("x-ember-error")) == (504, "wall_limit")
    assert late.text.startswith("Worker exceeded wall time limit.")
    harness.wait_for(lambda: upstream.gone == gone + 1)
    assert _get(harness, worker, upstream, "ok").text == "ok"
    assert harness.supervisor.isolate(worker) is process  # cancelled in time, as async code
