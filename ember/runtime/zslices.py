"""Bytes fed to zlib in bounded slices, by the supervisor (``inflate.py``) and the isolate
(``isolate/encoding.py``) alike: a module of its own so that the supervisor's decoder imports
nothing of the isolate's (brotli, the JS error types)."""

from __future__ import annotations

from collections.abc import Iterator

SLICE_BYTES = 4 * 1024  # the most encoded bytes fed to zlib at once


def slices(chunk: bytes) -> Iterator[memoryview]:
    """``chunk`` in views of at most SLICE_BYTES, as zlib is fed: at a gzip member's end zlib
    copies the rest of its input into ``unused_data``, so a chunk fed whole was copied once
    per member (quadratic: 32 MiB of empty 20-byte members cost 2.6 s of CPU in 64 KiB
    chunks, more in larger ones)."""
    view = memoryview(chunk)
    for start in range(0, len(view), SLICE_BYTES):
        yield view[start : start + SLICE_BYTES]
