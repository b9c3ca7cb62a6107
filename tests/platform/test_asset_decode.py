"""The sliced base64 decode of asset uploads (``assets._decode``) against the one-call
reference, ``base64.b64decode(validate=True)``, on random and malformed input around the
slice edges: the same bytes, or the same refusal."""

from __future__ import annotations

import base64
import binascii
import random

from ember.runtime.deployments.asset_session import _DECODE_SLICE
from ember.runtime.deployments.asset_session import decode as _decode


def _outcome(decode: object, text: bytes) -> bytes | str:
    try:
        return decode(text)  # type: ignore[operator,no-any-return]
    except (binascii.Error, ValueError):
        return "refused"


def _reference(text: bytes) -> bytes:
    return base64.b64decode(text, validate=True)


def test_sliced_decode_matches_the_reference() -> None:
    rng = random.Random(7)
    edge = _DECODE_SLICE * 3 // 4  # the bytes one slice of text holds
    sizes = [0, 1, 2, 3, edge - 1, edge, edge + 1, 2 * edge + 2]
    sizes += [rng.randrange(4 * edge) for _ in range(6)]
    for size in sizes:
        text = base64.b64encode(rng.randbytes(size))
        assert _decode(text) == _reference(text), size
        for _ in range(3):  # one byte changed, dropped or added somewhere
            at = rng.randrange(len(text) + 1)
            for bad in (
                text[:at] + b"=" + text[at + 1 :],
                text[:at] + text[at + 1 :],
                text[:at] + b"*" + text[at:],
            ):
                assert _outcome(_decode, bad) == _outcome(_reference, bad), (size, at)
    padded = b"YQ==" * 2 + b"A" * _DECODE_SLICE
    assert _outcome(_decode, padded) == _outcome(_reference, padded) == "refused"
