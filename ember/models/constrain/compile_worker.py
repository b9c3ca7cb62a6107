"""The compile worker: a process of its own that builds regex automata (``compile_regex``) for
the model server, so that the server's GIL is never held for it.

Building an automaton is pure Python at about 1 µs a unit of work (regex_nfa.py), up to
``MAX_PRODUCT_STATES`` states for one pattern and ``MAX_AUTOMATON_WORK`` units for one request
(about 1 CPU-s). In the server
process that time is taken from the engine's step thread, which waits for the GIL after each
of its many small torch ops: another tenant's stream stalled while a costly schema compiled
(BENCHMARKS.md). Here it costs the server a pipe round trip and a decode.

The protocol, over the worker's stdin and stdout: frames of a 4-byte big-endian length and
that many bytes of UTF-8 JSON, never pickle (the patterns are request data), at most
``MAX_FRAME`` bytes (a lone surrogate, which only Python's API can send, passes as its bytes:
``surrogatepass``, as the in-process compile takes it). A job is
``{"pattern": str, "search": bool, "length": [low, high or null], "budget": int or null}``;
its answer one of ``{"automaton": automaton_fields}``, ``{"refused": regex_error_fields}``
(the ``RegexError`` ``compile_regex`` raised, re-raised in the server as it would have raised
it), ``{"over": work}`` (the build passed ``budget`` and stopped there), or
``{"failed": str}`` (anything else, such as running out of its address space, or a job past
``MAX_FRAME``: read, dropped and answered so, where it was an exit mid-job). The worker
exits when its stdin closes: when the server stops it, or dies. Its first frame, once it has
imported what it needs, is ``{"ready": true}``.

    python -m ember.models.constrain.compile_worker ADDRESS_SPACE_BYTES
"""

from __future__ import annotations

import json
import resource
import struct
import sys
from typing import BinaryIO

from ember.errors import ProtocolError
from ember.models.constrain.automaton_wire import automaton_fields, regex_error_fields
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.regex_work import AutomatonWorkExceeded

HEADER = struct.Struct(">I")
READY = b'{"ready":true}'
# A job is one pattern, within a request body (32 MiB); an answer at the states' bound ~5 MiB.
# The client refuses a larger job before it sends it (compile_client.CompileJobTooLarge).
MAX_FRAME = 64 * 2**20
_DROP_CHUNK = 2**20


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's bytes; None at the end of the stream. A frame past ``MAX_FRAME`` is read
    (so that the next frame is found where it starts) and dropped: ``ProtocolError``."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        left = size
        while left > 0:
            dropped = len(stream.read(min(left, _DROP_CHUNK)))
            if dropped == 0:
                return None
            left -= dropped
        raise ProtocolError(f"a job of {size:,} bytes is past the {MAX_FRAME:,}-byte frame bound")
    data = stream.read(size)
    return data if len(data) == size else None


def frame(data: bytes) -> bytes:
    return HEADER.pack(len(data)) + data


def wire_bytes(value: object) -> bytes:
    """A job's or an answer's frame body: compact JSON, UTF-8 (a character 4 bytes at most,
    where ASCII escapes made an astral one 12: review41's 24 MB pattern a 72 MB job)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


def wire_value(data: bytes) -> object:
    """``wire_bytes``' value back (``ValueError``, ``UnicodeDecodeError`` for other bytes)."""
    return json.loads(data.decode("utf-8", "surrogatepass"))


def answer(data: bytes) -> bytes:
    """The answer to one job's bytes (see the module docstring)."""
    try:
        job = wire_value(data)
        if not isinstance(job, dict):
            raise ValueError("a job is a JSON object")
        pattern, search, (low, high) = job["pattern"], job["search"], job["length"]
        budget = job.get("budget")
        if not (
            isinstance(pattern, str)
            and isinstance(search, bool)
            and type(low) is int
            and (high is None or type(high) is int)
            and (budget is None or type(budget) is int)
        ):
            raise ValueError(
                "a job is {pattern: str, search: bool, length: [int, int|null], budget: int|null}"
            )
        try:
            built = compile_regex(pattern, search=search, length=(low, high), budget=budget)
        except RegexError as error:
            return wire_bytes({"refused": regex_error_fields(error)})
        except AutomatonWorkExceeded as error:
            return wire_bytes({"over": error.work})
        return wire_bytes({"automaton": automaton_fields(built)})
    except MemoryError:
        return b'{"failed":"the compile worker ran out of its address space"}'
    except Exception as error:  # the server names it; the worker stays up for the next job
        return wire_bytes({"failed": f"{type(error).__name__}: {error}"})


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    # Ready once imported: a job's time limit then counts the job alone, not the start.
    out.write(frame(READY))
    out.flush()
    while True:
        try:
            data = read_frame(inp)
        except ProtocolError as error:  # answered: an exit would fail it as a crash, "retry"
            reply = wire_bytes({"failed": str(error)})
        else:
            if data is None:
                return
            reply = answer(data)
        if len(reply) > MAX_FRAME:  # the client would take it for a broken worker
            reply = wire_bytes({"failed": f"an answer of {len(reply):,} bytes, past the bound"})
        out.write(frame(reply))
        out.flush()


def main() -> None:
    limit = int(sys.argv[1])
    # A pattern within the states' bounds needs tens of MiB; past the limit a job fails with
    # MemoryError, answered as such, instead of taking the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
