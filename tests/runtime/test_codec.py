"""The fast frame codec against the reference: same bytes out, same message (or error) in."""

from __future__ import annotations

import asyncio

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.errors import ProtocolError
from ember.runtime import fields as F
from ember.runtime import protocol as P
from ember.runtime.codec import CHECKS, FastDecoder
from ember.runtime.frames import FrameWriter

from .test_protocol import SAMPLES

# Values around every bound the validators check, plus wrong types.
EDGE_INTS = [-1, 0, 1, 99, 100, 599, 600, F.MAX_ID, F.MAX_ID + 1, 2**64 - 1]
EDGE_VALUES = st.one_of(
    st.sampled_from(EDGE_INTS),
    st.integers(-(2**63), 2**64 - 1),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["x" * 16, "x" * 17, "GET"]),
    st.binary(max_size=20),
    st.lists(st.lists(st.text(max_size=3), max_size=3), max_size=3),
    st.lists(st.integers(0, 3), max_size=3),
)


EDGE_FIXED: list[object] = [
    *EDGE_INTS,
    None,
    True,
    1.5,
    "",
    "x" * 16,
    "x" * 17,
    "x" * (F.MAX_TEXT + 1),
    "x" * (F.MAX_URL + 1),
    b"",
    b"x" * (F.MAX_CHUNK_BYTES + 1),
    b"x" * (F.MAX_INLINE_BODY_BYTES + 1),
    [],
    [["a", "b"]],
    [["a"]],
    [["a", 1]],
    [("a", "b")] * (F.MAX_HEADERS + 1),
    {"a": 1},
]


def _frame(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _reference(payload: bytes, table: dict[int, P.MessageType]) -> object:
    try:
        return P.decode(payload, table)
    except ProtocolError:
        return ProtocolError


def _fast(payload: bytes, table: dict[int, P.MessageType]) -> object:
    try:
        return FastDecoder(table).decode(payload)
    except ProtocolError:
        return ProtocolError


def _same(payload: bytes) -> None:
    for table in (P.FROM_ISOLATE, P.TO_ISOLATE):
        expected, found = _reference(payload, table), _fast(payload, table)
        assert found == expected
        assert type(found) is type(expected)  # e.g. Done(1) == End(1) as tuples


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_valid_frames_decode_alike(message: P.Message) -> None:
    _same(P.encode(message)[4:])


@pytest.mark.parametrize("message", [m for m in SAMPLES if m.TAG in CHECKS], ids=type)
def test_every_field_at_every_bound_decodes_alike(message: P.Message) -> None:
    for index in range(len(message)):
        for value in EDGE_FIXED:
            fields: list[object] = [message.TAG, *message]
            fields[1 + index] = value
            _same(_frame(fields))
        _same(_frame([message.TAG, *message][: 1 + index]))  # too few fields
    _same(_frame([message.TAG, *message, 0]))  # too many


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(sorted(CHECKS)), st.lists(EDGE_VALUES, max_size=7))
def test_hot_tags_with_random_fields_decode_alike(tag: int, fields: list[object]) -> None:
    _same(_frame([tag, *fields]))


@settings(max_examples=1000, deadline=None)
@given(
    st.sampled_from([m for m in SAMPLES if m.TAG in CHECKS]),
    st.integers(0, 6),
    EDGE_VALUES,
)
def test_one_mutated_field_decodes_alike(message: P.Message, index: int, value: object) -> None:
    fields = [message.TAG, *message]
    fields[1 + index % len(message)] = value
    _same(_frame(fields))


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=8), st.text(max_size=8)) | st.lists(st.text(max_size=3)),
        max_size=6,
    ),
    st.integers(0, 3),
)
def test_random_headers_decode_alike(headers: list[object], big: int) -> None:
    if big:  # past the total-size bound
        headers = [*headers, ("h" * 10, "v" * (F.MAX_HEADER_BYTES // big))]
    _same(_frame([P.Response.TAG, 1, 200, headers, None, 0, True]))
    _same(_frame([P.Request.TAG, 1, "GET", "http://x/", headers, b"", 0]))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=60))
def test_random_bytes_decode_alike(data: bytes) -> None:
    _same(data)


def test_oversized_fields_fall_back_to_the_reference_error() -> None:
    payload = _frame([P.Data.TAG, 1, b"x" * (F.MAX_CHUNK_BYTES + 1)])
    with pytest.raises(ProtocolError, match="chunk"):
        FastDecoder(P.FROM_ISOLATE).decode(payload)


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_write_buffer_size(self) -> int:
        return 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=5), st.binary(max_size=40))
def test_frame_writer_sends_the_reference_bytes(messages: list[P.Message], blob: bytes) -> None:
    messages = [P.Data(m.sid, blob) if isinstance(m, P.Data) else m for m in messages]

    async def write() -> list[bytes]:
        writer = FrameWriter()
        writer.transport = transport = _Transport()
        with pytest.raises(TypeError):  # an unpackable value must leave nothing in the packer
            writer.send(P.CallResult(1, object(), 0))
        for message in messages:
            writer.send(message)
        await asyncio.sleep(0)  # the coalesced flush
        return transport.written

    assert asyncio.run(write()) == [b"".join(P.encode(m) for m in messages)]


def test_an_armed_writer_flushes_after_the_callbacks_scheduled_before_it() -> None:
    """As the isolate arms it after a read: the tasks that read started answer in one write."""

    async def write() -> tuple[list[bytes], list[bytes], list[bytes]]:
        loop = asyncio.get_running_loop()
        writer = FrameWriter()
        writer.transport = transport = _Transport()
        writer.arm()  # nothing queued: nothing to write
        await asyncio.sleep(0)
        empty = list(transport.written)
        for rid in (1, 2, 3):  # three tasks' first steps, scheduled by the read
            loop.call_soon(writer.send, P.Done(rid))
        writer.arm()
        await asyncio.sleep(0)  # one iteration: the three steps, then the flush
        armed = list(transport.written)
        transport.written.clear()
        for rid in (4, 5):  # unarmed: the first frame schedules the flush for the next iteration
            loop.call_soon(writer.send, P.Done(rid))
        await asyncio.sleep(0)
        return empty, armed, list(transport.written)

    empty, armed, unarmed = asyncio.run(write())
    assert empty == []
    assert armed == [b"".join(P.encode(P.Done(rid)) for rid in (1, 2, 3))]
    assert unarmed == []  # not yet written after the iteration that queued them
