"""Frames: round trips, split reads, and hostile input that must only ever raise ProtocolError."""

from __future__ import annotations

import re
import struct
import typing

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.errors import ProtocolError
from ember.runtime import fields as F
from ember.runtime import protocol as P
from ember.runtime.frames import FrameDecoder

SAMPLES: list[P.Message] = [
    P.Init({"main": "worker.py", "vars": {"A": "b"}}),
    P.Request(7, "POST", "http://127.0.0.1/x?y=1", [("a", "b"), ("a", "c")], b"body", 0),
    P.Scheduled(8, "*/5 * * * *", 1_700_000_000_000.0),
    P.Cancel(7, True),
    P.CallResult(3, {"keys": [{"name": "k"}], "list_complete": True}, 0),
    P.CallError(3, "kv", "KV GET failed: 400 Key names must not be empty", {"status": 400}),
    P.Hello(1234, P.PROTOCOL_VERSION),
    P.Ready(["fetch", "scheduled"]),
    P.LoadError("syntax", "SyntaxError: invalid syntax", 'File "worker.py", line 3'),
    P.Response(7, 200, [("content-type", "text/plain")], b"hi", 0, True),
    P.Response(7, 418, [], None, 5, False, "I'm a teapot"),
    P.PipeResponse(7, 200, [("content-type", "text/event-stream")], 3),
    P.PipeResponse(7, 200, [], 3, "Café"),
    P.RequestError(7, "exception", "ValueError: x", "Traceback ..."),
    P.Done(7),
    P.Done(7, 41_250),
    P.Response(7, 200, [], b"", 0, True, "", 12_345),
    P.CpuReport(1_000_000, [[7, 12_345], [8, 0]]),
    P.Log(7, "log", "hello"),
    P.LogDropped(7, 12, 1188),
    P.Call(4, 7, "KV", "get", ["key", None], 0),
    P.CancelCall(4),
    P.Data(2, b"\x00" * 100),
    P.End(2),
    P.Abort(2, "gone"),
    P.Credit(2, 131072),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: P.Message) -> None:
    table = P.TO_ISOLATE if message.TAG in P.TO_ISOLATE else P.FROM_ISOLATE
    (payload,) = FrameDecoder().feed(P.encode(message))
    assert P.decode(payload, table) == message


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40))
def test_split_reads_give_the_same_frames(cuts: list[int]) -> None:
    stream = b"".join(P.encode(m) for m in SAMPLES)
    decoder = FrameDecoder()
    frames: list[bytes] = []
    position = 0
    for cut in cuts * (len(stream) // sum(cuts) + 1):
        frames += decoder.feed(stream[position : position + cut])
        position += cut
        if position >= len(stream):
            break
    assert len(frames) == len(SAMPLES) and decoder.buffered == 0


def test_oversized_frame_is_refused_before_buffering() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="exceeds"):
        decoder.feed(struct.pack(">I", F.MAX_FRAME_BYTES + 1) + b"x")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([23, 1, 200, [], None, 0, True, ""], "expected 8 fields"),  # no CPU figure
        ([23, 1, 99, [], None, 0, True, "", 0], "HTTP status"),
        ([23, -1, 200, [], None, 0, True, "", 0], "unsigned"),
        ([23, 1, 200, [["a"]], None, 0, True, "", 0], "header pairs"),
        ([23, 1, 200, [], None, 0, True, "a\r\nset-cookie: x=1", 0], "status text"),
        ([23, 1, 200, [], None, 0, True, "", -5], "unsigned"),
        ([25, 1], "expected 2 fields"),  # Done without its CPU figure
        ([31, 0, {}], "expected an array"),
        ([29, 1, 200, [], 3, "x" * (F.MAX_STATUS_TEXT + 1)], "status text"),
        ([26, 1, "log", "x" * (F.MAX_TEXT + 1)], "at most"),
        ([40, 1, b"x" * (F.MAX_CHUNK_BYTES + 1)], "chunk"),
        ([1, {}], "unknown or misdirected"),  # Init may only come from the supervisor
        ([99], "unknown"),
        ({"tag": 20}, "not a [tag"),
    ],
)
def test_invalid_isolate_frames_name_the_problem(value: object, reason: str) -> None:
    payload = msgpack.packb(value, use_bin_type=True)
    with pytest.raises(ProtocolError, match=re.escape(reason)):
        P.decode(payload, P.FROM_ISOLATE)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_raise_protocol_error(data: bytes) -> None:
    try:
        for payload in FrameDecoder(max_frame=4096).feed(data):
            P.decode(payload, P.FROM_ISOLATE)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats()
        | st.text(max_size=5)
        | st.binary(max_size=5),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=3), children, max_size=3)
        ),
        max_leaves=20,
    )
)
def test_random_msgpack_values_only_ever_raise_protocol_error(value: object) -> None:
    for tag in P.FROM_ISOLATE:
        payload = msgpack.packb([tag, value, value, value], use_bin_type=True)
        try:
            P.decode(payload, P.FROM_ISOLATE)
        except ProtocolError:
            pass


def test_every_message_type_has_a_tag_of_its_own() -> None:
    # The tables are dicts keyed by tag: two types sharing one would silently drop the first
    # (two branches once both took 30 and merged cleanly).
    types = typing.get_args(P.Message)
    assert len({m.TAG for m in types}) == len(types)
    for message in types:
        tables = [t for t in (P.TO_ISOLATE, P.FROM_ISOLATE) if message.TAG in t]
        assert tables and all(t[message.TAG] is message for t in tables), message.__name__
