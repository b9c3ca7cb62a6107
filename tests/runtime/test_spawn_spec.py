"""The ChildSpec travels supervisor -> child over the isolate socket, never through the zygote.

``spec_frame`` (supervisor) and ``receive_spec`` (child) over real socketpairs: the spec comes
back whole, the isolate protocol's frames behind it are left unread, a spec larger than the
socket's buffer arrives while the child reads, and a short or bad frame is a clear error. A
spec the supervisor cannot encode fails the spawn naming the spec, before the zygote is asked.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from ember.errors import ProtocolError, WorkerCrashed
from ember.runtime.child import ChildSpec, receive_spec, spec_frame
from ember.runtime.protocol import FRAME_LENGTH
from ember.runtime.spawner import Spawner

SPEC = ChildSpec(
    deployment_id="acct:worker:v1:p",
    code_dir="/srv/ember/code/v1",
    ipc_fd=0,
    env={"PATH": "/usr/bin:/bin", "GREETING": "hi"},
    memory_bytes=128 << 20,
    nofile=512,
    sandbox={"layers": ["hygiene", "rlimits"], "env": {"GREETING": "hi"}},
)


def test_the_spec_comes_back_whole_and_leaves_the_next_frame_unread() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        after = FRAME_LENGTH.pack(5) + b"hello"  # what the protocol sends next (Init)
        ours.sendall(spec_frame(SPEC) + after)
        received = receive_spec(theirs.fileno(), report_fd=7)
        assert received == ChildSpec(
            SPEC.deployment_id,
            SPEC.code_dir,
            theirs.fileno(),
            SPEC.env,
            SPEC.memory_bytes,
            SPEC.nofile,
            SPEC.sandbox,
            report_fd=7,
        )
        assert theirs.recv(64) == after


def test_a_spec_larger_than_the_socket_buffer_arrives_while_the_child_reads() -> None:
    big = dict(SPEC.env, BIG="x" * (2 << 20))
    frame = spec_frame(ChildSpec("d", "/c", 0, big, 1 << 20))
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert len(frame) > ours.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        writer = threading.Thread(target=ours.sendall, args=(frame,))
        writer.start()
        received = receive_spec(theirs.fileno())
        writer.join(10)
        assert received.env == big


def test_a_short_or_bad_spec_frame_is_a_clear_error() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(spec_frame(SPEC)[:-3])
        ours.shutdown(socket.SHUT_WR)
        with pytest.raises(ProtocolError, match="closed before the spawn spec arrived"):
            receive_spec(theirs.fileno())
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(FRAME_LENGTH.pack(1) + b"\x01")  # a msgpack int, not a map
        with pytest.raises(ProtocolError, match="must be a map, not int"):
            receive_spec(theirs.fileno())
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(FRAME_LENGTH.pack(1 << 30))
        with pytest.raises(ProtocolError, match="spawn spec of 1073741824 bytes is past"):
            receive_spec(theirs.fileno())


def test_a_spec_that_cannot_be_encoded_fails_the_spawn_naming_it() -> None:
    async def spawn() -> None:
        spawner = Spawner()
        try:
            await spawner.spawn(ChildSpec("d", "/c", 0, {"BAD": object()}, 1 << 20))  # type: ignore[dict-item]
        finally:
            await spawner.close()

    with pytest.raises(WorkerCrashed, match="bad spawn spec: TypeError: can not serialize"):
        asyncio.run(spawn())
