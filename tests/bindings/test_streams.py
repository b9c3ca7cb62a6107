"""``ReadableStream`` as Python Workers scripts use a JS stream: ``getReader()`` with
``read()`` -> ``done``/``value``, ``releaseLock()``, ``cancel()``; ``tee()``; ``async for``.
A stream is still read once: a second reader while one holds the lock is a TypeError."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ember.bindings.streams import ReadableStream
from tests.runtime.harness import Harness, write_project


class Source:
    """A ByteStream that records whether it was closed (a binding's supervisor stream)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.pulled = 0
        self.closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.pulled += 1
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_reader_reads_chunks_then_done() -> None:
    async def main() -> list[tuple[bool, object]]:
        stream = ReadableStream(Source([b"a", b"bc"]))
        reader = stream.getReader()
        assert stream.locked
        results = []
        for _ in range(4):
            result = await reader.read()
            results.append((result.done, result.value))
            assert result["done"] == result.done  # a JS object: attribute and key alike
        return results

    assert run(main()) == [(False, b"a"), (False, b"bc"), (True, None), (True, None)]


def test_bytes_source_and_empty_source() -> None:
    async def main() -> tuple[object, object]:
        whole = ReadableStream(b"xyz").getReader()
        empty = ReadableStream(b"").getReader()
        first = await whole.read()
        return (first.value, (await whole.read()).done), ((await empty.read()).done, None)

    assert run(main()) == ((b"xyz", True), (True, None))


def test_one_reader_at_a_time_and_release_lets_another_continue() -> None:
    async def main() -> list[bytes]:
        stream = ReadableStream(Source([b"1", b"2", b"3"]))
        reader = stream.getReader()
        with pytest.raises(TypeError, match="locked"):
            stream.getReader()
        with pytest.raises(TypeError, match="locked"):
            stream.__aiter__()
        got = [(await reader.read()).value]
        reader.releaseLock()
        assert not stream.locked
        with pytest.raises(TypeError, match="released"):
            await reader.read()
        again = stream.getReader()
        got += [(await again.read()).value, (await again.read()).value]
        assert (await again.read()).done
        return got  # type: ignore[return-value]

    assert run(main()) == [b"1", b"2", b"3"]


def test_reader_cancel_closes_the_source() -> None:
    source = Source([b"1", b"2"])

    async def main() -> tuple[object, object]:
        stream = ReadableStream(source)
        reader = stream.getReader()
        await reader.read()
        await reader.cancel()
        return (await reader.read()).done, stream.hand_over()

    assert run(main()) == (True, None) and source.closed


def test_async_for_still_reads_once() -> None:
    async def main() -> list[bytes]:
        stream = ReadableStream(Source([b"a", b"b"]))
        chunks = [chunk async for chunk in stream]
        with pytest.raises(TypeError):
            stream.getReader()
        with pytest.raises(TypeError):
            stream.__aiter__()
        return chunks

    assert run(main()) == [b"a", b"b"]


def test_tee_gives_both_branches_every_chunk() -> None:
    source = Source([b"a", b"b", b"c"])

    async def main() -> tuple[list[bytes], bytes]:
        stream = ReadableStream(source)
        left, right = stream.tee()
        assert stream.locked
        with pytest.raises(TypeError):
            stream.getReader()
        first = [chunk async for chunk in left]
        return first, await right.read_all()

    assert run(main()) == ([b"a", b"b", b"c"], b"abc")
    assert source.pulled == 3  # each chunk pulled once from the source


def test_tee_cancels_the_source_only_when_both_branches_cancel() -> None:
    source = Source([b"a", b"b"])

    async def main() -> bytes:
        left, right = ReadableStream(source).tee()
        await left.cancel()
        assert not source.closed
        rest = await right.read_all()
        await right.cancel()
        return rest

    assert run(main()) == b"ab" and source.closed


WORKER = """
from workers import Response

async def on_fetch(request, env):
    key = request.headers.get("x-kind", "reader")  # one key per request: KV takes 1 write/s
    await env.KV.put(key, "hello stream")
    stream = await env.KV.get(key, type="stream")
    if request.headers.get("x-kind") == "tee":
        left, right = stream.tee()
        return Response((await left.read_all()).decode() + "|" + (await right.read_all()).decode())
    reader = stream.getReader()
    parts = []
    while True:
        result = await reader.read()
        if result.done:
            break
        parts.append(bytes(result.value).decode())
    reader.releaseLock()
    return Response("".join(parts) + f" locked={stream.locked}")
"""


def test_a_worker_reads_a_binding_stream_with_get_reader_and_tee(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "reader", WORKER, "kv_namespaces:\n  - binding: KV\n")
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        assert client.get("/").text == "hello stream locked=False"
        assert client.get("/", headers={"x-kind": "tee"}).text == "hello stream|hello stream"


def test_cancel_on_a_locked_stream_is_a_type_error_and_leaves_the_reader_reading() -> None:
    # JS: ReadableStream.cancel() rejects with a TypeError while a reader holds the lock; the
    # reader's own cancel() is the way to stop it then.
    source = Source([b"1", b"2"])

    async def main() -> tuple[str, object]:
        stream = ReadableStream(source)
        reader = stream.getReader()
        with pytest.raises(TypeError) as refused:
            await stream.cancel()
        return str(refused.value), (await reader.read()).value

    message, chunk = run(main())
    assert "locked" in message and "reader.cancel()" in message
    assert chunk == b"1" and not source.closed


def test_cancel_after_the_reader_released_closes_the_source() -> None:
    source = Source([b"1", b"2"])

    async def main() -> object:
        stream = ReadableStream(source)
        reader = stream.getReader()
        await reader.read()
        reader.releaseLock()
        await stream.cancel()
        return stream.hand_over()

    assert run(main()) is None and source.closed
