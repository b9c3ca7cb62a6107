"""Limits are enforced by the supervisor; a hostile handler costs nobody else anything."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ember.runtime.process import IsolateProcess
from tests.runtime.harness import Harness, write_project

CANARY = """
from workers import Response

async def fetch(request, env, ctx):
    return Response("canary ok")
"""

SPIN = """
import asyncio
from workers import Response

async def fetch(request, env, ctx):
    kind = request.headers.get("x-kind")
    if kind == "spin":
        while True:
            pass
    if kind == "stubborn":
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    if kind == "waiter":
        await asyncio.sleep(0.05)
        return Response("waiter ok")
    return Response("fine")
"""


@pytest.fixture(scope="module")
def canary(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    return harness.deploy(write_project(tmp_path_factory.mktemp("canary") / "canary", CANARY))


def _current(harness: Harness, deployment_id: str) -> IsolateProcess:
    process = harness.supervisor.isolate(deployment_id)
    assert process is not None
    return process


def test_infinite_loop_gets_503_and_the_isolate_carries_on(
    harness: Harness, tmp_path: Path, canary: str
) -> None:
    deployment_id = harness.deploy(write_project(tmp_path / "spin", SPIN), limits={"cpu_ms": 100})
    first = _current(harness, deployment_id)
    with (
        ThreadPoolExecutor(4) as pool,
        harness.client(deployment_id) as client,
        harness.client(canary) as other,
    ):
        spin = pool.submit(client.get, "/", headers={"x-kind": "spin"})
        waiter = pool.submit(client.get, "/", headers={"x-kind": "waiter"})
        canary_replies = [other.get("/").text for _ in range(3)]
        spun, waited = spin.result(), waiter.result()
        after = client.get("/")
    assert spun.status_code == 503
    assert spun.text.startswith("Worker exceeded CPU time limit.")
    assert spun.headers["x-ember-error"] == "cpu_limit"
    assert waited.text == "waiter ok"  # the other request in the same isolate carried on
    assert canary_replies == ["canary ok"] * 3
    assert after.text == "fine"
    assert _current(harness, deployment_id) is not first  # replaced after the limit


def test_code_that_swallows_the_interrupt_is_killed(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(
        write_project(tmp_path / "stubborn", SPIN), limits={"cpu_ms": 100}
    )
    with harness.client(deployment_id) as client:
        stubborn = client.get("/", headers={"x-kind": "stubborn"})
        after = client.get("/")
    assert stubborn.status_code == 503 and stubborn.headers["x-ember-error"] == "cpu_limit"
    assert after.text == "fine"


def test_memory_blowup_is_killed_and_others_are_unaffected(
    harness: Harness, tmp_path: Path, canary: str
) -> None:
    worker = """
    from workers import Response

    HOARD = []

    async def fetch(request, env, ctx):
        if request.headers.get("x-kind") == "hog":
            while True:
                HOARD.append(bytearray(8 * 1024 * 1024))
                HOARD[-1][::4096] = b"x" * len(HOARD[-1][::4096])  # touch every page
        return Response("fine")
    """
    deployment_id = harness.deploy(
        write_project(tmp_path / "hog", worker), limits={"memory_bytes": 96 << 20}
    )
    with harness.client(deployment_id) as client, harness.client(canary) as other:
        hog = client.get("/", headers={"x-kind": "hog"})
        assert other.get("/").text == "canary ok"
        after = client.get("/")
    assert hog.status_code == 503
    assert hog.text.startswith("Worker exceeded memory limit.")
    assert after.text == "fine"


def test_wall_time_limit_cancels_the_request(harness: Harness, tmp_path: Path) -> None:
    worker = """
    import asyncio
    from workers import Response

    async def fetch(request, env, ctx):
        if request.headers.get("x-kind") == "sleep":
            await asyncio.sleep(30)
        return Response("fine")
    """
    deployment_id = harness.deploy(
        write_project(tmp_path / "sleepy", worker), limits={"wall_ms": 300}
    )
    with harness.client(deployment_id) as client:
        slow = client.get("/", headers={"x-kind": "sleep"})
        assert client.get("/").text == "fine"
    assert (slow.status_code, slow.headers["x-ember-error"]) == (504, "wall_limit")


ECHO_LENGTH = """
from workers import Response

async def fetch(request, env, ctx):
    if request.headers.get("x-kind") == "big":
        async def body():
            for _ in range(64):
                yield b"y" * 65536
        return Response(body())
    return Response(str(len(await request.bytes())))
"""


def test_request_body_over_the_limit_is_413(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(
        write_project(tmp_path / "bodies", ECHO_LENGTH), limits={"max_request_bytes": 1 << 20}
    )

    def chunked(size: int):  # type: ignore[no-untyped-def]
        for _ in range(size // 65536):
            yield b"z" * 65536

    with harness.client(deployment_id) as client:
        assert client.post("/", content=b"a" * (1 << 20)).text == str(1 << 20)
        declared = client.post("/", content=b"a" * ((1 << 20) + 1))
        streamed = client.post("/", content=chunked(4 << 20))
        assert client.post("/", content=b"ok").text == "2"
    assert declared.status_code == 413
    assert streamed.status_code == 413 and streamed.headers["x-ember-error"] == "request_too_large"


def test_response_over_the_limit_is_cut_off(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(
        write_project(tmp_path / "huge", ECHO_LENGTH), limits={"max_response_bytes": 1 << 20}
    )
    with harness.client(deployment_id) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/", headers={"x-kind": "big"}).read()
        assert client.post("/", content=b"abc").text == "3"


def test_crash_is_502_and_the_next_request_gets_a_new_isolate(
    harness: Harness, tmp_path: Path
) -> None:
    worker = """
    import os
    from workers import Response

    async def fetch(request, env, ctx):
        if request.headers.get("x-kind") == "exit":
            os._exit(3)
        if request.headers.get("x-kind") == "garbage":
            for fd in range(3, 64):
                try:
                    # a 5-byte frame of 0xc1, which is never valid msgpack
                    os.write(fd, b"\\x00\\x00\\x00\\x05" + b"\\xc1" * 5)
                except OSError:
                    pass
        return Response("fine")
    """
    deployment_id = harness.deploy(write_project(tmp_path / "crash", worker))
    with harness.client(deployment_id) as client:
        crashed = client.get("/", headers={"x-kind": "exit"})
        assert client.get("/").text == "fine"
        garbage = client.get("/", headers={"x-kind": "garbage"})
        assert client.get("/").text == "fine"
    assert (crashed.status_code, crashed.headers["x-ember-error"]) == (502, "crashed")
    assert (garbage.status_code, garbage.headers["x-ember-error"]) == (502, "protocol_error")


def test_spin_at_import_fails_startup_once_without_respawning(
    harness: Harness, tmp_path: Path
) -> None:
    worker = "while True:\n    pass\n"
    root = write_project(tmp_path / "import-spin", worker)
    deployment = harness.deployment(root, limits={"startup_cpu_ms": 150})
    error = harness.run(harness.supervisor.deploy(deployment))
    assert error is not None and error.error.tag == "startup_cpu_limit"
    with harness.client(deployment.id) as client:
        first, second = client.get("/"), client.get("/")
    assert first.status_code == second.status_code == 503
    assert "Script startup exceeded CPU time limit." in first.text
    assert harness.supervisor.isolate(deployment.id) is None  # sticky: no respawn storm
    # A way out: what the startup used, the limit, and the setting that raises it.
    used = re.search(r"used (\d[\d,]*) ms of CPU .*\(limit 150 ms\)", first.text)
    assert used and int(used.group(1).replace(",", "")) > 150, first.text
    assert "limits.startup_cpu_ms" in first.text


def test_subrequest_limit(harness: Harness, tmp_path: Path, canary: str) -> None:
    worker = f"""
    from workers import Response, fetch as subrequest

    async def fetch(request, env, ctx):
        results = []
        for _ in range(3):
            try:
                headers = {{"x-test-deployment": "{canary}"}}
                reply = await subrequest("{harness.url}/", headers=headers)
                results.append(await reply.text())
            except Exception as exc:
                results.append(f"{{type(exc).__name__}}: {{exc}}")
        return Response(" | ".join(results))
    """
    deployment_id = harness.deploy(
        write_project(tmp_path / "subrequests", worker), limits={"subrequests": 2}
    )
    with harness.client(deployment_id) as client:
        text = client.get("/").text
    assert text == "canary ok | canary ok | LimitExceeded: Too many subrequests."


def test_forged_done_frame_never_leaves_a_request_hanging(harness: Harness, tmp_path: Path) -> None:
    worker = """
    import asyncio, os, socket, stat
    from workers import Response

    async def fetch(request, env, ctx):
        if request.headers.get("x-kind") == "forge":
            for fd in range(3, 64):
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        os.write(fd, bytes([0, 0, 0, 4, 0x93, 25, 1, 0]))  # Done(1, 0), msgpack
                except OSError:
                    pass
            await asyncio.sleep(5)
        return Response("fine")
    """
    deployment_id = harness.deploy(write_project(tmp_path / "forger", worker))
    with harness.client(deployment_id) as client:
        forged = client.get("/", headers={"x-kind": "forge"})
        assert client.get("/").text == "fine"
    assert (forged.status_code, forged.headers["x-ember-error"]) == (502, "no_response")
