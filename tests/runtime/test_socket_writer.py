"""``SocketWriter``: the isolate's writes, with what the socket did not take kept in order and
sent by its watcher (or taken by a blocking call), over a real socketpair."""

from __future__ import annotations

import asyncio
import os
import random
import resource
import socket

from ember.runtime.isolate.socket_writer import SocketWriter


async def _pair() -> tuple[SocketWriter, socket.socket, asyncio.Transport]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_unix_connection(asyncio.Protocol, sock=ours)
    return SocketWriter(transport, loop), theirs, transport  # type: ignore[arg-type]


async def _read_all(peer: socket.socket, size: int, rounds: int = 500) -> bytes:
    got = bytearray()
    for _ in range(rounds):
        await asyncio.sleep(0.005)
        try:
            while True:
                chunk = peer.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
        except BlockingIOError:
            pass
        if len(got) >= size:
            break
    return bytes(got)


def test_the_watcher_alone_sends_what_the_socket_did_not_take_in_order() -> None:
    async def main() -> None:
        writer, peer, transport = await _pair()
        rng = random.Random()
        parts = [rng.randbytes(rng.randint(1, 3_000_000)) for _ in range(6)]
        for part in parts:
            writer.write(part)
        assert writer.get_write_buffer_size() > 0  # more than a socket buffer: some waited
        expected = b"".join(parts)
        assert await _read_all(peer, len(expected)) == expected
        assert writer.get_write_buffer_size() == 0 and not writer._watching
        transport.close()
        peer.close()

    asyncio.run(main())


def test_a_blocking_call_takes_the_pending_bytes_first() -> None:
    async def main() -> None:
        writer, peer, transport = await _pair()
        writer.write(b"a" * 5_000_000)
        pending = writer.take_pending()
        assert pending and writer.get_write_buffer_size() == 0
        writer.write(b"tail")  # nothing pending now: goes straight to the socket's room
        transport.close()
        peer.close()

    asyncio.run(main())


def test_a_full_descriptor_table_does_not_strand_pending_bytes() -> None:
    # The watcher's descriptor is made up front: with every descriptor taken when bytes
    # first wait (a handler leaking files), they are still sent once the socket has room.
    async def main() -> None:
        writer, peer, transport = await _pair()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        hog = []
        try:
            try:
                while True:
                    hog.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                pass
            writer.write(b"x" * 4_000_000)
        finally:
            for fd in hog:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        writer.write(b"END")
        got = await _read_all(peer, 4_000_003)
        assert len(got) == 4_000_003 and got.endswith(b"END")
        transport.close()
        peer.close()

    asyncio.run(main())
