"""Per-stream credit: a slow reader stops the writer; a writer past its window is a violation."""

from __future__ import annotations

import asyncio

import pytest

from ember.errors import ProtocolError
from ember.runtime import fields as F
from ember.runtime import protocol as P
from ember.runtime.mux import WINDOW, Mux, StreamAborted


def _pair() -> tuple[Mux, Mux]:
    """Two muxes wired to each other through encode/decode, like the two ends of a socket."""
    left_inbox: list[P.Message] = []
    right_inbox: list[P.Message] = []
    left = Mux(right_inbox.append)
    right = Mux(left_inbox.append)
    left.inbox, right.inbox = left_inbox, right_inbox  # type: ignore[attr-defined]
    return left, right


def _deliver(mux: Mux) -> None:
    inbox = mux.inbox  # type: ignore[attr-defined]
    while inbox:
        message = inbox.pop(0)
        if isinstance(message, P.Data | P.End | P.Abort | P.Credit):
            mux.on_frame(message)


def test_writer_waits_for_credit_and_data_arrives_intact() -> None:
    async def scenario() -> None:
        sender, receiver = _pair()
        out = sender.open_out()
        incoming = receiver.expect_in(out.sid)
        payload = bytes(range(256)) * 4096  # 1 MiB: four windows
        writer = asyncio.ensure_future(out.send(payload))
        await asyncio.sleep(0)
        assert out.sent == WINDOW and not writer.done()  # blocked: no credit yet
        received = bytearray()
        while len(received) < len(payload):
            _deliver(receiver)
            received += await incoming.__anext__()
            _deliver(sender)  # credits flow back
            await asyncio.sleep(0)
        await writer
        out.end()
        _deliver(receiver)
        with pytest.raises(StopAsyncIteration):
            await incoming.__anext__()
        assert bytes(received) == payload

    asyncio.run(scenario())


def test_data_past_the_window_is_a_violation() -> None:
    receiver = Mux(lambda message: None)
    receiver.expect_in(1)
    for _ in range(WINDOW // F.MAX_CHUNK_BYTES):
        receiver.on_frame(P.Data(1, b"x" * F.MAX_CHUNK_BYTES))
    with pytest.raises(ProtocolError, match="credit window"):
        receiver.on_frame(P.Data(1, b"x"))


def test_unannounced_and_reused_stream_ids_are_violations() -> None:
    receiver = Mux(lambda message: None)
    with pytest.raises(ProtocolError, match="never announced"):
        receiver.on_frame(P.Data(5, b"x"))
    receiver.expect_in(5)
    with pytest.raises(ProtocolError, match="reused"):
        receiver.expect_in(5)


def test_abort_reaches_the_reader_and_late_data_after_release_is_dropped() -> None:
    async def scenario() -> None:
        receiver = Mux(lambda message: None)
        stream = receiver.expect_in(1)
        receiver.on_frame(P.Data(1, b"abc"))
        receiver.on_frame(P.Abort(1, "worker failed"))
        assert await stream.__anext__() == b"abc"
        with pytest.raises(StreamAborted, match="worker failed"):
            await stream.__anext__()
        other = receiver.expect_in(2)
        receiver.release_in(other)
        receiver.on_frame(P.Data(2, b"late"))  # dropped, not a violation

    asyncio.run(scenario())


def test_a_lazy_stream_flows_only_once_read_or_is_claimed_unread() -> None:
    async def scenario() -> None:
        sender, receiver = _pair()
        out = sender.open_out(lazy=True)
        incoming = receiver.expect_in(out.sid, lazy=True)
        assert incoming.untouched and out.started is not None and not out.started.done()
        with pytest.raises(ProtocolError, match="credit window"):
            incoming.push(b"x")  # no credit was granted: data is a violation
        writer = asyncio.ensure_future(out.send(b"hello"))
        await asyncio.sleep(0)
        assert out.sent == 0 and not writer.done()  # nothing flows before the first read
        reader = asyncio.ensure_future(incoming.__anext__())
        await asyncio.sleep(0)
        assert not incoming.untouched
        _deliver(sender)  # the first read granted the window
        assert out.started.done() and out.started.result() is None
        await writer
        _deliver(receiver)
        assert await reader == b"hello"
        assert not out.claim("too late")  # already read: it cannot be handed back

        claimed = sender.open_out(lazy=True)
        unread = receiver.expect_in(claimed.sid, lazy=True)
        assert claimed.claim("the supervisor sends it") and claimed.started is not None
        assert claimed.started.result() == "the supervisor sends it"
        waiting = asyncio.ensure_future(unread.wait_ended())
        claimed.end()
        _deliver(receiver)
        assert await waiting is None

    asyncio.run(scenario())


def test_sync_readers_and_writers_move_the_same_bytes_with_the_same_credit() -> None:
    """``send_nowait`` / ``read_nowait`` (for code that cannot await: sync HTTP clients) keep
    the window exactly as ``send`` / ``async for`` do, lazily started streams included."""

    async def scenario() -> None:
        sender, receiver = _pair()
        out = sender.open_out(lazy=True)
        incoming = receiver.expect_in(out.sid, lazy=True)
        chunk = b"s" * F.MAX_CHUNK_BYTES
        assert not out.send_nowait(chunk)  # lazy: no credit until the reader reads
        assert incoming.read_nowait() is None  # the first read grants the window...
        _deliver(sender)
        sent = 0
        while out.send_nowait(chunk):
            sent += len(chunk)
        assert sent == WINDOW  # ...exactly one window, then the writer must wait
        received = 0
        for _ in range(64):  # read everything, handing credit back as we go
            _deliver(receiver)
            while (piece := incoming.read_nowait()) is not None and piece:
                received += len(piece)
            _deliver(sender)
            while sent < 3 * WINDOW and out.send_nowait(chunk):
                sent += len(chunk)
        assert received == sent == 3 * WINDOW
        out.end()
        _deliver(receiver)
        assert incoming.read_nowait() == b""  # the end

        aborted = sender.open_out()
        stream = receiver.expect_in(aborted.sid)
        aborted.abort("gone")
        _deliver(receiver)
        with pytest.raises(StreamAborted):
            stream.read_nowait()

    asyncio.run(scenario())
