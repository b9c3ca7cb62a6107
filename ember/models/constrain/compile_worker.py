"""The compile worker: a process of its own that builds regex automata (``compile_regex``) for
the model server, so that the server's GIL is never held for it.

Building an automaton is pure Python at about 1 µs a unit of work (regex_nfa.py), up to
``MAX_PRODUCT_STATES`` states for one pattern and ``MAX_AUTOMATON_WORK`` units for one request
(about 1 CPU-s). In the server
process that time is taken from the engine's step thread, which waits for the GIL after each
of its many small torch ops: another tenant's stream stalled while a costly schema compiled
(BENCHMARKS.md). Here it costs the server a pipe round trip and a decode.

The protocol, over the worker's stdin and stdout: frames of a 4-byte big-endian length and
that many bytes of UTF-8 JSON, never pickle (the patterns are request data). A job is
``{"pattern": str, "search": bool, "length": [low, high or null], "budget": int or null}``;
its answer one of ``{"automaton": automaton_fields}``, ``{"refused": regex_error_fields}``
(the ``RegexError`` ``compile_regex`` raised, re-raised in the server as it would have raised
it), ``{"over": work}`` (the build passed ``budget`` and stopped there), or
``{"failed": str}`` (anything else, such as running out of its address space). The worker
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

from ember.models.constrain.automaton_wire import automaton_fields, regex_error_fields
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.regex_work import AutomatonWorkExceeded

HEADER = struct.Struct(">I")
READY = b'{"ready":true}'
MAX_FRAME = 64 * 2**20  # a job is one pattern: far less; an answer at the states' bound, ~5 MiB


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's bytes; None at the end of the stream."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes is past the {MAX_FRAME}-byte bound")
    data = stream.read(size)
    return data if len(data) == size else None


def frame(data: bytes) -> bytes:
    return HEADER.pack(len(data)) + data


def answer(data: bytes) -> bytes:
    """The answer to one job's bytes (see the module docstring)."""
    try:
        job = json.loads(data)
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
            return json.dumps({"refused": regex_error_fields(error)}).encode()
        except AutomatonWorkExceeded as error:
            return json.dumps({"over": error.work}).encode()
        return json.dumps({"automaton": automaton_fields(built)}, separators=(",", ":")).encode()
    except MemoryError:
        return b'{"failed":"the compile worker ran out of its address space"}'
    except Exception as error:  # the server names it; the worker stays up for the next job
        return json.dumps({"failed": f"{type(error).__name__}: {error}"}).encode()


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    # Ready once imported: a job's time limit then counts the job alone, not the start.
    out.write(frame(READY))
    out.flush()
    while (data := read_frame(inp)) is not None:
        out.write(frame(answer(data)))
        out.flush()


def main() -> None:
    limit = int(sys.argv[1])
    # A pattern within the states' bounds needs tens of MiB; past the limit a job fails with
    # MemoryError, answered as such, instead of taking the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
