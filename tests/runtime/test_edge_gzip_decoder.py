"""``edge_gzip``'s pieces: the streamed decoder against ``gzip.decompress`` on random input (its
slow reference), a bomb cut at the limit in bounded pieces, broken streams, and
``Accept-Encoding`` read as RFC 9110 says. End to end: ``test_edge_gzip.py``."""

from __future__ import annotations

import asyncio
import gzip
import random
import zlib
from collections.abc import AsyncIterator

import pytest

from ember.runtime import edge_gzip
from ember.runtime.http import ResponseAborted


async def _source(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _decode(source: bytes | list[bytes], limit: int = 1 << 40) -> tuple[list[bytes], list[str]]:
    said: list[str] = []
    stream = edge_gzip.GunzipStream(
        source if isinstance(source, bytes) else _source(source),
        limit,
        over_limit=lambda: said.append("over"),
        broken=lambda: said.append("broken"),
    )

    async def read() -> list[bytes]:
        try:
            return [chunk async for chunk in stream]
        finally:
            await stream.aclose()

    return asyncio.run(read()), said


def _split(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(6)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def test_the_streamed_decoder_matches_gzip_decompress_on_random_input() -> None:
    rng = random.Random(4)
    for _ in range(40):
        plain = rng.choice([rng.randbytes, lambda n: b"ab" * n])(rng.randrange(300_000))
        members = [gzip.compress(plain, compresslevel=rng.choice([1, 6, 9]))]
        if rng.random() < 0.3:  # concatenated members are one gzip file
            members.append(gzip.compress(plain[:1000]))
        encoded = b"".join(members)
        source: bytes | list[bytes] = encoded if rng.random() < 0.3 else _split(encoded, rng)
        chunks, said = _decode(source)
        assert b"".join(chunks) == gzip.decompress(encoded) and not said
        assert all(0 < len(chunk) <= edge_gzip.CHUNK_BYTES for chunk in chunks)


def test_a_bomb_stops_at_the_limit_in_bounded_chunks() -> None:
    bomb = gzip.compress(bytes(50 << 20))
    said: list[str] = []
    got: list[int] = []

    async def read() -> None:
        stream = edge_gzip.GunzipStream(
            _source([bomb]), 1 << 20, lambda: said.append("over"), lambda: said.append("broken")
        )
        with pytest.raises(ResponseAborted):
            async for chunk in stream:
                got.append(len(chunk))
        await stream.aclose()

    asyncio.run(read())
    assert said == ["over"] and sum(got) <= 1 << 20 and max(got) <= edge_gzip.CHUNK_BYTES


@pytest.mark.parametrize(
    "source",
    [
        [gzip.compress(b"x" * 1000)[:-10]],  # cut short
        [b"\x1f\x8b" + b"\xff" * 20],  # not gzip
        [gzip.compress(b"x" * 1000), b"trailing garbage"],
    ],
)
def test_a_broken_stream_is_aborted(source: list[bytes]) -> None:
    with pytest.raises(ResponseAborted, match="gzip"):
        _decode(source)


def test_an_empty_body_stays_empty() -> None:
    assert _decode(b"") == ([], [])
    assert _decode([]) == ([], [])


@pytest.mark.parametrize(
    ("accept", "accepts"),
    [
        (None, False),
        ("", False),
        ("identity", False),
        ("gzip;q=0", False),
        ("gzip; q=0.000", False),
        ("*;q=0", False),
        ("*, gzip;q=0", False),
        ("br, zstd", False),
        ("gzip", True),
        ("Gzip", True),
        ("x-gzip", True),
        ("gzip;q=0.1", True),
        ("br;q=1.0, gzip;q=0.8, *;q=0.1", True),
        ("*", True),
        ("deflate, *;q=0.5", True),
        ("gzip;q=nonsense", True),  # a bad weight is no refusal
    ],
)
def test_accept_encoding_is_read_as_rfc_9110_says(accept: str | None, accepts: bool) -> None:
    headers = [("host", "x")] + ([("Accept-Encoding", accept)] if accept is not None else [])
    assert edge_gzip.accepts_gzip(headers) is accepts


def test_zlib_detail_the_decoder_relies_on() -> None:
    # decompress(data, max_length) leaves what it could not use in unconsumed_tail: the
    # decoder's output stays bounded whatever the ratio.
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = decoder.decompress(gzip.compress(bytes(1 << 20)), 1000)
    assert len(out) == 1000 and decoder.unconsumed_tail
