"""The tolerant WebSocket server protocol: unmasked client frames (as wrangler tail sends its
first one) are read like masked ones, at every payload length encoding."""

from __future__ import annotations

import os
import struct

from websockets.frames import Frame, Opcode
from websockets.http11 import Request

from ember.runtime.platform.websocket import _TolerantServerProtocol

HANDSHAKE = (
    b"GET /client/v4/tail-ws/x HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: trace-v1\r\n\r\n"
)


def frame_bytes(payload: bytes, masked: bool) -> bytes:
    """A final text frame, masked or not, with the shortest length encoding."""
    head = bytes([0x81])
    bit = 0x80 if masked else 0
    if len(payload) < 126:
        head += bytes([bit | len(payload)])
    elif len(payload) < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", len(payload))
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", len(payload))
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def test_masked_and_unmasked_frames_of_every_length_arrive_intact() -> None:
    protocol = _TolerantServerProtocol()
    protocol.receive_data(HANDSHAKE)
    (request,) = protocol.events_received()
    assert isinstance(request, Request)
    protocol.send_response(protocol.accept(request))
    payloads = [b'{"debug":false}', b"x" * 200, b"y" * 70000, b""]
    sent = [(p, masked) for p in payloads for masked in (False, True)]
    stream = b"".join(frame_bytes(p, masked) for p, masked in sent)
    for start in range(0, len(stream), 777):  # in pieces, as TCP delivers them
        protocol.receive_data(stream[start : start + 777])
    frames = protocol.events_received()
    assert all(isinstance(f, Frame) and f.opcode is Opcode.TEXT for f in frames)
    assert [f.data for f in frames] == [p for p, _ in sent]
