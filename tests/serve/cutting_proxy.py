"""A loopback TCP proxy in front of a real ``ember serve`` that loses chosen answers.

Each request is passed on whole to the platform, which handles it; for a request ``cut`` picks,
the proxy then closes the client's connection without a byte of the answer: to the client, the
platform died while the request was in flight, after it may have done the work (as a platform
killed mid-request does). Everything else is relayed, each answer saying ``Connection: close``, so
that every request comes on a connection of its own.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

Cut = Callable[[str, str], bool]  # (method, path) -> lose this answer


class CuttingProxy:
    def __init__(self, upstream: str, cut: Cut) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.cut = cut
        self.cuts: list[tuple[str, str]] = []  # what was cut, in order
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            request = _read_request(client.makefile("rb"))
            if request is None:
                return
            head, body = request
            method, path = (part.decode() for part in head.split(b" ", 2)[:2])
            answer = self._forward(head, body)
            if self.cut(method, path.split("?", 1)[0]):
                self.cuts.append((method, path))
                return  # closed with the answer unsent
            client.sendall(answer)

    def _forward(self, head: bytes, body: bytes) -> bytes:
        lines = [
            line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")
        ]
        with socket.create_connection(self.upstream) as upstream:
            upstream.sendall(b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body)
            chunks = []
            while chunk := upstream.recv(65536):
                chunks.append(chunk)
        answer = b"".join(chunks)
        # Tell the client this connection ends with the answer (the body runs to the close).
        head_end = answer.index(b"\r\n\r\n")
        kept = [
            line
            for line in answer[:head_end].split(b"\r\n")
            if not line.lower().startswith((b"connection:", b"keep-alive:"))
        ]
        return b"\r\n".join([*kept, b"Connection: close"]) + answer[head_end:]


def _read_request(reader: object) -> tuple[bytes, bytes] | None:
    lines = []
    while True:
        line = reader.readline()  # type: ignore[attr-defined]
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        lines.append(line.rstrip(b"\r\n"))
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = reader.read(length) if length else b""  # type: ignore[attr-defined]
    return b"\r\n".join(lines), body
