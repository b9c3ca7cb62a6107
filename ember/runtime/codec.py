"""The hot-path frame decoder: what ``protocol.decode`` returns for every request's frames, cheaper.

``protocol.decode`` is the reference: generic, one validator call per field. Per request the
supervisor decodes a Response (and maybe Done, Log) and the isolate a Request; for those, and for
stream frames, a specialised check here validates the same fields with the same bounds inline.
It only ever *accepts*: a frame it has any doubt about (an unknown or rare tag, a wrong arity,
any field out of bounds, undecodable bytes) goes to ``protocol.decode``, which returns the message
or raises the precise ``ProtocolError``. So both give the same message for every payload, or both
raise (tests compare them on random and mutated frames).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from ember.runtime.fields import (
    MAX_CHUNK_BYTES,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_ID,
    MAX_INLINE_BODY_BYTES,
    MAX_TEXT,
    MAX_URL,
    Headers,
)
from ember.runtime.protocol import (
    UNPACK_OPTIONS,
    Cancel,
    Credit,
    Data,
    Done,
    End,
    Log,
    Message,
    MessageType,
    Request,
    Response,
    decode,
)

Check = Callable[[list[Any]], Message | None]


def _headers(value: Any) -> Headers | None:
    if type(value) is not list or len(value) > MAX_HEADERS:
        return None
    total = 0
    result: Headers = []
    for pair in value:
        if type(pair) is not list or len(pair) != 2:
            return None
        name, item = pair
        if type(name) is not str or type(item) is not str:
            return None
        total += len(name) + len(item)
        result.append((name, item))
    return result if total <= MAX_HEADER_BYTES else None


def _request(v: list[Any]) -> Message | None:
    if len(v) != 7:
        return None
    _, rid, method, url, headers, body, sid = v
    if not (
        type(rid) is int
        and 0 <= rid <= MAX_ID
        and type(method) is str
        and len(method) <= 16
        and type(url) is str
        and len(url) <= MAX_URL
        and (body is None or (type(body) is bytes and len(body) <= MAX_INLINE_BODY_BYTES))
        and type(sid) is int
        and 0 <= sid <= MAX_ID
    ):
        return None
    pairs = _headers(headers)
    return None if pairs is None else Request(rid, method, url, pairs, body, sid)


def _response(v: list[Any]) -> Message | None:
    if len(v) != 9:
        return None
    _, rid, status, headers, body, sid, done, reason, cpu_us = v
    if reason != "":  # the usual head has none; the reference checks a handler's own
        return None
    if not (
        type(rid) is int
        and 0 <= rid <= MAX_ID
        and type(status) is int
        and 100 <= status <= 599
        and (body is None or (type(body) is bytes and len(body) <= MAX_INLINE_BODY_BYTES))
        and type(sid) is int
        and 0 <= sid <= MAX_ID
        and type(done) is bool
        and type(cpu_us) is int
        and 0 <= cpu_us <= MAX_ID
    ):
        return None
    pairs = _headers(headers)
    return None if pairs is None else Response(rid, status, pairs, body, sid, done, reason, cpu_us)


def _one_id(cls: MessageType) -> Check:
    def check(v: list[Any]) -> Message | None:
        if len(v) == 2 and type(v[1]) is int and 0 <= v[1] <= MAX_ID:
            return cls(v[1])  # type: ignore[no-any-return]
        return None

    return check


def _done(v: list[Any]) -> Message | None:
    if len(v) == 3 and type(v[1]) is int and 0 <= v[1] <= MAX_ID and type(v[2]) is int:
        if 0 <= v[2] <= MAX_ID:
            return Done(v[1], v[2])
    return None


def _cancel(v: list[Any]) -> Message | None:
    if len(v) == 3 and type(v[1]) is int and 0 <= v[1] <= MAX_ID and type(v[2]) is bool:
        return Cancel(v[1], v[2])
    return None


def _log(v: list[Any]) -> Message | None:
    if len(v) != 4:
        return None
    _, rid, level, text = v
    if (
        type(rid) is int
        and 0 <= rid <= MAX_ID
        and type(level) is str
        and len(level) <= 16
        and type(text) is str
        and len(text) <= MAX_TEXT
    ):
        return Log(rid, level, text)
    return None


def _data(v: list[Any]) -> Message | None:
    if (
        len(v) == 3
        and type(v[1]) is int
        and 0 <= v[1] <= MAX_ID
        and type(v[2]) is bytes
        and len(v[2]) <= MAX_CHUNK_BYTES
    ):
        return Data(v[1], v[2])
    return None


def _credit(v: list[Any]) -> Message | None:
    if (
        len(v) == 3
        and type(v[1]) is int
        and 0 <= v[1] <= MAX_ID
        and type(v[2]) is int
        and 0 <= v[2] <= MAX_ID
    ):
        return Credit(v[1], v[2])
    return None


CHECKS: dict[int, Check] = {
    Request.TAG: _request,
    Response.TAG: _response,
    Done.TAG: _done,
    Cancel.TAG: _cancel,
    Log.TAG: _log,
    Data.TAG: _data,
    End.TAG: _one_id(End),
    Credit.TAG: _credit,
}


class FastDecoder:
    """``decode(payload, table)`` with fast checks for the hot tags of ``table``."""

    def __init__(self, table: dict[int, MessageType]) -> None:
        self._table = table
        self._checks = {tag: check for tag, check in CHECKS.items() if tag in table}

    def decode(self, payload: bytes) -> Message:
        """The message in ``payload``; ProtocolError (from the reference) if it is invalid."""
        try:
            value = msgpack.unpackb(payload, **UNPACK_OPTIONS)
        except Exception:  # noqa: BLE001 - the reference decoder names the problem
            value = None
        if type(value) is list and value and type(value[0]) is int:
            check = self._checks.get(value[0])
            if check is not None:
                message = check(value)
                if message is not None:
                    return message
        return decode(payload, self._table)
