"""``TappedStream``, the base of the AI call record's and the gateway log's stream wrappers:
the chunks pass through unchanged, and ``finish`` runs exactly once, with the size, head and
tail seen, whether the stream ends, is closed mid-way, or fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ember.bindings.ai.tapped_stream import STREAM_RAISED, TAIL_BYTES, TappedStream, tokens_of

USAGE = b'data: {"usage": {"prompt_tokens": 7, "completion_tokens": 3}}\n\n'


class Recorded(TappedStream):
    def __init__(self, chunks: AsyncIterator[bytes], head_bytes: int = 0) -> None:
        super().__init__(chunks, head_bytes)
        self.finished: list[tuple[int, bytes, bytes]] = []

    def finish(self) -> None:
        self.finished.append((self.size, bytes(self.head), self.tail))


class Source:
    """Chunks, then the end or ``error``; records whether it was closed."""

    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks = list(chunks)
        self.error = error
        self.closed = 0

    def __aiter__(self) -> Source:
        return self

    async def __anext__(self) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        if self.error is not None:
            raise self.error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closed += 1


def test_a_stream_read_to_its_end_finishes_once_with_what_went_by() -> None:
    big = b"x" * (TAIL_BYTES + 10)

    async def scenario() -> tuple[list[bytes], Recorded]:
        stream = Recorded(Source([b"data: 1\n\n", big, USAGE]), head_bytes=12)
        seen = [chunk async for chunk in stream]
        await stream.aclose()  # the response closes it too: still once
        return seen, stream

    seen, stream = asyncio.run(scenario())
    assert seen == [b"data: 1\n\n", big, USAGE]
    assert len(stream.finished) == 1
    size, head, tail = stream.finished[0]
    assert size == 9 + len(big) + len(USAGE)
    assert head == (b"data: 1\n\n" + big)[:12]
    assert len(tail) == TAIL_BYTES and tail.endswith(USAGE)
    assert tokens_of(tail) == (7, 3)


def test_a_stream_closed_mid_way_finishes_once_and_closes_its_source() -> None:
    async def scenario() -> tuple[Recorded, Source]:
        source = Source([b"a", b"b", b"c"])
        stream = Recorded(source)
        assert await stream.__anext__() == b"a"
        await stream.aclose()
        await stream.aclose()
        return stream, source

    stream, source = asyncio.run(scenario())
    assert stream.finished == [(1, b"", b"a")]
    assert source.closed == 2  # each aclose is passed on; the record is made once


def test_a_stream_whose_source_fails_finishes_once_and_passes_the_error_on() -> None:
    async def scenario() -> tuple[Recorded, list[bytes], int]:
        stream = Recorded(Source([b"a", b"b"], RuntimeError("replica went away")))
        seen: list[bytes] = []
        with pytest.raises(RuntimeError, match="replica went away"):
            async for chunk in stream:
                seen.append(chunk)
        at_failure = len(stream.finished)  # before anybody closes it
        await stream.aclose()
        return stream, seen, at_failure

    stream, seen, at_failure = asyncio.run(scenario())
    assert seen == [b"a", b"b"] and at_failure == 1
    assert stream.finished == [(2, b"", b"ab")]


def test_the_base_alone_has_no_finish() -> None:
    with pytest.raises(TypeError, match="abstract"):
        TappedStream(Source([]))  # type: ignore[abstract]


class Coded(TappedStream):
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        super().__init__(chunks)
        self.codes: list[int | None] = []

    def finish(self) -> None:
        self.codes.append(self.failure_code)


@pytest.mark.parametrize(
    ("last", "code"),
    [
        (USAGE + b"data: [DONE]\n\n", None),  # answered
        (b'data: {"errors": [{"code": 3040, "message": "x"}]}\n\ndata: [DONE]\n\n', 3040),
        (b'data: {"errors":[{"code":5006,"message":"x"}]}\n\ndata: [DONE]\n\n', 5006),
        (
            b'data: {"error": {"message": "m", "type": "server_error", "param": null, '
            b'"code": 3043}}\n\ndata: [DONE]\n\n',
            3043,
        ),  # fmt: skip
        # A model's own text naming an error is escaped inside its event: not a failure.
        (b'data: {"response": "data: {\\"errors\\": [{\\"code\\": 1}]}"}\n\n', None),
    ],
)
def test_failure_code_is_the_code_of_the_failure_event_a_stream_ended_with(
    last: bytes, code: int | None
) -> None:
    async def scenario() -> Coded:
        stream = Coded(Source([b'data: {"response": "hi"}\n\n', last]))
        _ = [chunk async for chunk in stream]
        return stream

    assert asyncio.run(scenario()).codes == [code]


def test_a_stream_that_raises_has_the_replica_failure_code() -> None:
    async def scenario() -> Coded:
        stream = Coded(Source([b"data: 1\n\n"], error=OSError("gone")))
        with pytest.raises(OSError):
            _ = [chunk async for chunk in stream]
        return stream

    assert asyncio.run(scenario()).codes == [STREAM_RAISED]


class Broken(TappedStream):
    def finish(self) -> None:
        raise OSError("log write failed")


def test_a_finish_hook_that_raises_neither_cuts_the_answer_nor_leaves_the_source_open() -> None:
    async def scenario() -> tuple[list[bytes], Source, Source]:
        whole = Source([b"a", b"b"])
        seen = [chunk async for chunk in Broken(whole)]  # ends cleanly for the reader
        cut = Source([b"a", b"b"])
        stream = Broken(cut)
        await stream.__anext__()
        await stream.aclose()  # the hook raises inside: the source is closed anyway
        return seen, whole, cut

    seen, _, cut = asyncio.run(scenario())
    assert seen == [b"a", b"b"]
    assert cut.closed == 1
