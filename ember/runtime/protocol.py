"""The supervisor <-> isolate protocol: length-prefixed msgpack frames over one socketpair.

A frame is a 4-byte big-endian length and a msgpack array ``[tag, *fields]``. Everything an
isolate sends is hostile: ``frames.FrameDecoder`` refuses a length over ``MAX_FRAME_BYTES``
before buffering it, msgpack runs with size caps, and ``decode`` checks the tag, the arity and
every field's type and bound (``fields.py``), raising ``ProtocolError`` (the supervisor then
kills that isolate and answers its requests with 502). Nothing is ever unpickled.

Messages, by direction (``rid`` request id, ``cid`` call id, ``sid`` stream id):

    supervisor -> isolate    Init  Request  Scheduled  Cancel  CallResult  CallError
    isolate -> supervisor    Hello  Ready  LoadError  Response  PipeResponse  RequestError
                             Done  Log  LogDropped  Call  CancelCall  CpuReport
    both                     Data  End  Abort  Credit

Bodies larger than one frame are streams: the sender allocates a ``sid`` and announces it in
``Request``/``Response``/``Call``/``CallResult``, then sends ``Data`` chunks and ``End`` (or
``Abort``). The receiver grants ``Credit`` as it consumes; sending past the granted window is a
protocol violation (``mux.py``). ``sid`` 0 means "no stream". A binding reply stream is *lazy*
(no credit until the isolate reads it); ``PipeResponse`` hands such a stream back unread as the
response body, and the supervisor then ends it with ``End``/``Abort`` once the body went out.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import msgpack

from ember.errors import ProtocolError
from ember.runtime.fields import (
    MAX_FRAME_BYTES,
    MAX_HEADERS,
    MAX_NAME,
    MAX_TEXT,
    MAX_URL,
    Headers,
    any_value,
    boolean,
    chunk,
    header_pairs,
    http_status,
    list_value,
    map_value,
    number,
    opt_bytes,
    status_text,
    text,
    uint,
)

PROTOCOL_VERSION = 1
FRAME_LENGTH = struct.Struct(">I")  # every frame's prefix


# -- messages ----------------------------------------------------------------------------------


class Init(NamedTuple):
    """The deployment the isolate runs (supervisor -> isolate, once, after Hello)."""

    TAG = 1
    FIELDS = (map_value,)
    spec: dict[str, Any]


class Request(NamedTuple):
    """A fetch event. ``body`` inline when small; else ``body_sid`` streams it."""

    TAG = 2
    FIELDS = (uint, text(16), text(MAX_URL), header_pairs, opt_bytes, uint)
    rid: int
    method: str
    url: str
    headers: Headers
    body: bytes | None
    body_sid: int


class Scheduled(NamedTuple):
    """A cron event; ``scheduled_time`` in milliseconds since the epoch."""

    TAG = 3
    FIELDS = (uint, text(MAX_NAME), number)
    rid: int
    cron: str
    scheduled_time: float


class Cancel(NamedTuple):
    """Cancel a request's handler (client gone); ``background`` also its waitUntil work."""

    TAG = 4
    FIELDS = (uint, boolean)
    rid: int
    background: bool


class CallResult(NamedTuple):
    """A binding call's value; ``sid`` != 0 means a reply stream follows."""

    TAG = 5
    FIELDS = (uint, any_value, uint)
    cid: int
    value: Any
    sid: int


class CallError(NamedTuple):
    """A binding call failed; ``kind`` picks the exception class in the isolate."""

    TAG = 6
    FIELDS = (uint, text(MAX_NAME), text(MAX_TEXT), map_value)
    cid: int
    kind: str
    message: str
    data: dict[str, Any]


class Hello(NamedTuple):
    """First frame of an isolate, sent before any user code runs: the pid to watch and kill."""

    TAG = 20
    FIELDS = (uint, uint)
    pid: int
    version: int


class Ready(NamedTuple):
    """The main module loaded; ``handlers`` lists the events it handles."""

    TAG = 21
    FIELDS = (list_value,)
    handlers: list[Any]


class LoadError(NamedTuple):
    """The main module failed to load (syntax error, exception, no handler)."""

    TAG = 22
    FIELDS = (text(MAX_NAME), text(MAX_TEXT), text(MAX_TEXT))
    kind: str
    message: str
    traceback: str


class Response(NamedTuple):
    """Response head, with the body inline or as stream ``sid``; ``done``: no waitUntil left.

    ``status_text``: the handler's reason phrase, "" for the standard one. ``cpu_us``: the CPU
    the request's own code ran so far (the isolate's claim: ``cpushare.py``).
    """

    TAG = 23
    FIELDS = (uint, http_status, header_pairs, opt_bytes, uint, boolean, status_text, uint)
    rid: int
    status: int
    headers: Headers
    body: bytes | None
    sid: int
    done: bool
    status_text: str = ""
    cpu_us: int = 0


class PipeResponse(NamedTuple):
    """Response head whose body is the supervisor's own reply stream ``sid``, handed back unread.

    The isolate keeps the request open (no Done) until the supervisor ends that stream.
    """

    TAG = 29
    FIELDS = (uint, http_status, header_pairs, uint, status_text)
    rid: int
    status: int
    headers: Headers
    sid: int
    status_text: str = ""


class RequestError(NamedTuple):
    """The handler failed: ``kind`` is exception, invalid_response, no_handler, cpu, memory,
    response_headers (over the limits in fields.py)."""

    TAG = 24
    FIELDS = (uint, text(MAX_NAME), text(MAX_TEXT), text(MAX_TEXT))
    rid: int
    kind: str
    message: str
    traceback: str


class Done(NamedTuple):
    """The request and its waitUntil work finished; no more frames about ``rid`` follow.

    ``cpu_us``: the CPU its own code ran in all (the isolate's claim: ``cpushare.py``)."""

    TAG = 25
    FIELDS = (uint, uint)
    rid: int
    cpu_us: int = 0


class Log(NamedTuple):
    """A console line (print, logging, console.log); ``rid`` 0 outside any request."""

    TAG = 26
    FIELDS = (uint, text(16), text(MAX_TEXT))
    rid: int
    level: str
    message: str


class LogDropped(NamedTuple):
    """Console lines of ``rid`` dropped past the isolate's budget (``console_gate.py``)."""

    TAG = 30
    FIELDS = (uint, uint, uint)
    rid: int
    lines: int
    chars: int


class Call(NamedTuple):
    """A binding call from the handler of request ``rid``; ``sid`` != 0: an upload follows."""

    TAG = 27
    FIELDS = (uint, uint, text(MAX_NAME), text(MAX_NAME), list_value, uint)
    cid: int
    rid: int
    binding: str
    method: str
    args: list[Any]
    sid: int


class CancelCall(NamedTuple):
    """The isolate no longer wants a call's result (its task was cancelled)."""

    TAG = 28
    FIELDS = (uint,)
    cid: int


class CpuReport(NamedTuple):
    """The CPU each event in flight ran so far, ``[[rid, cpu_us], ...]``, as of the isolate's
    process CPU clock reading ``at_us``: its answer to a SIGXCPU that found no request over its
    limit running (the isolate's claim: ``cpushare.py``)."""

    TAG = 31
    FIELDS = (uint, list_value)
    at_us: int
    usage: list[Any]


class Data(NamedTuple):
    """A chunk of the sender's stream ``sid``."""

    TAG = 40
    FIELDS = (uint, chunk)
    sid: int
    data: bytes


class End(NamedTuple):
    """The sender's stream ``sid`` ended normally."""

    TAG = 41
    FIELDS = (uint,)
    sid: int


class Abort(NamedTuple):
    """The sender's stream ``sid`` ended abnormally."""

    TAG = 42
    FIELDS = (uint, text(MAX_TEXT))
    sid: int
    reason: str


class Credit(NamedTuple):
    """The receiver of the peer's stream ``sid`` consumed ``amount`` more bytes."""

    TAG = 43
    FIELDS = (uint, uint)
    sid: int
    amount: int


Message = (
    Init
    | Request
    | Scheduled
    | Cancel
    | CallResult
    | CallError
    | Hello
    | Ready
    | LoadError
    | Response
    | PipeResponse
    | RequestError
    | Done
    | Log
    | LogDropped
    | Call
    | CancelCall
    | CpuReport
    | Data
    | End
    | Abort
    | Credit
)
MessageType = type[Any]

TO_ISOLATE: dict[int, MessageType] = {
    m.TAG: m
    for m in (Init, Request, Scheduled, Cancel, CallResult, CallError, Data, End, Abort, Credit)
}
FROM_ISOLATE: dict[int, MessageType] = {
    m.TAG: m
    for m in (Hello, Ready, LoadError, Response, PipeResponse, RequestError, Done, Log, Call)
    + (LogDropped, CancelCall, CpuReport, Data, End, Abort, Credit)
}


def encode(message: Message) -> bytes:
    """One frame: length prefix + msgpack ``[TAG, *fields]`` (messages are named tuples)."""
    payload = msgpack.packb([message.TAG, *message], use_bin_type=True)
    return FRAME_LENGTH.pack(len(payload)) + payload


# msgpack's size caps for everything an isolate sends (codec.py's fast path uses the same).
UNPACK_OPTIONS: dict[str, Any] = {
    "raw": False,
    "use_list": True,
    "strict_map_key": True,
    "max_str_len": MAX_FRAME_BYTES,
    "max_bin_len": MAX_FRAME_BYTES,
    "max_array_len": MAX_HEADERS * 4,
    "max_map_len": 4096,
    "max_ext_len": 0,
}


def decode(payload: bytes, table: dict[int, MessageType]) -> Message:
    """Parse and validate one frame payload against ``table`` (the sender's direction).

    The reference decoder: ``codec.FastDecoder`` gives the same result, faster, on hot frames.
    """
    try:
        value = msgpack.unpackb(payload, **UNPACK_OPTIONS)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}") from None
    if type(value) is not list or not value or type(value[0]) is not int:
        raise ProtocolError("frame is not a [tag, ...] array")
    cls = table.get(value[0])
    if cls is None:
        raise ProtocolError(f"unknown or misdirected message tag {value[0]}")
    fields = value[1:]
    if len(fields) != len(cls.FIELDS):
        raise ProtocolError(
            f"{cls.__name__}: expected {len(cls.FIELDS)} fields, found {len(fields)}"
        )
    try:
        return cls(*[check(item) for check, item in zip(cls.FIELDS, fields, strict=True)])
    except ProtocolError as exc:
        raise ProtocolError(f"{cls.__name__}: {exc}") from None
