"""Where ``httphead.BoundedHeadProtocol`` cuts a read before handing it to the parser, so that
the head bound counts exactly.

The bound counts the bytes since the last "reset": the end of a head, a body byte, the end of a
message. llhttp reports those through callbacks but never says at which byte of a read they
happened, so a read parsed whole left the bytes after its last reset uncounted: head, body and
200,000 bytes of trailers in one read were served, as was a pipelined head past the bound
behind a body. The protocol therefore hands the parser a read in pieces that end where a reset
can happen, and then knows where each happened:

- in a head, a piece ends after the first ``\\n\\r\\n`` (llhttp takes CRLF only, so every head
  ends with it; a match that ends no head, in the empty lines llhttp skips before a request, only
  cuts once more);
- in a body of known length (``Content-Length``, or a chunk whose size line was read), a piece
  is that many bytes: all body, nothing to count;
- in chunk framing (a size line, the CRLF after a chunk, trailers), a piece ends after the first
  ``\\n``, the end of a line: the next chunk's data starts only after one.

A piece that carried body bytes has them first, then at most the framing up to its end: what
follows its last body byte is its length less its body bytes. A piece that carried no body but
ended a head or a message ended it at its last byte. Any other piece is counted whole. A head is
usually one piece and its ``Content-Length`` body one more; chunked bodies take two or three
small pieces a chunk besides their data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HEAD_END = b"\n\r\n"  # the last bytes of every head (llhttp requires CRLF)
LINE_KEPT = 64  # bytes of a framing line kept to read a chunk's size from (the hex comes first)


@dataclass(slots=True)
class ReadCut:
    """One connection's cutting state, between reads."""

    # Body bytes known to come next (0: chunk framing next; None: not known, cut at each line)
    data_left: int | None = 0
    tail: bytes = b""  # the last two bytes handed over: a head end split across two reads
    line: bytearray = field(default_factory=bytearray)  # the framing line so far (its start)

    def piece_end(self, data: bytes, start: int, in_head: bool) -> int:
        """Where the piece of ``data`` starting at ``start`` ends (exclusive)."""
        if in_head:
            # A head end split across the previous piece and this one.
            before = self.tail if start == 0 else data[max(0, start - 2) : start]
            joined = (before + data[start : start + 2]).find(HEAD_END)
            if joined >= 0:
                return start + joined + len(HEAD_END) - len(before)
            found = data.find(HEAD_END, start)
            return found + len(HEAD_END) if found >= 0 else len(data)
        if self.data_left:
            return min(len(data), start + self.data_left)
        found = data.find(b"\n", start)
        return found + 1 if found >= 0 else len(data)

    def handed(
        self, piece: bytes | memoryview, body: int, in_head: bool, chunk_header: bool
    ) -> None:
        """``piece`` went to the parser: ``body`` bytes of it body, ``in_head`` before it,
        ``chunk_header``: llhttp read a chunk's size line, which the piece ended."""
        self.tail = (self.tail + bytes(piece[-2:]))[-2:]
        if in_head:
            return  # a head that ended in it set data_left (head_ended)
        if self.data_left:
            # Not all body: the length was mistaken, so cut at each line from here on.
            self.data_left = self.data_left - len(piece) if body == len(piece) else None
            return
        if len(self.line) < LINE_KEPT:
            self.line += piece[: LINE_KEPT - len(self.line)]
        if chunk_header:  # its data comes next (none for the last chunk: trailers then)
            try:
                self.data_left = int(bytes(self.line).split(b";", 1)[0].strip(b"\r\n"), 16)
            except ValueError:
                self.data_left = None
        if bytes(piece[-1:]) == b"\n":
            self.line.clear()

    def head_ended(self, headers: list[tuple[bytes, bytes]]) -> None:
        """A head ended with a body to come: chunked (framing first) or of a known length."""
        self.line.clear()
        names = {name for name, _ in headers}
        if b"transfer-encoding" in names:
            self.data_left = 0  # llhttp refuses any transfer coding but chunked last
            return
        lengths = [value for name, value in headers if name == b"content-length"]
        self.data_left = int(lengths[0]) if lengths and lengths[0].isdigit() else None
