"""``TextDecoder``, ``crypto.subtle`` (digest, HMAC keys), ``btoa`` / ``atob`` as Python Workers
reach them through ``js``: the values are the standard vectors (FIPS 180, RFC 4231), the errors
workerd's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ember.js_errors import JsException
from ember.runtime.isolate.buffers import ArrayBuffer
from ember.runtime.isolate.textcodec import TextDecoder, TextEncoder, atob, btoa
from ember.runtime.isolate.webcrypto import SubtleCrypto
from tests.runtime.harness import Harness, write_project

SUBTLE = SubtleCrypto()


def run(awaitable):  # noqa: ANN001, ANN201 - what the coroutine gives
    return asyncio.run(_await(awaitable))


async def _await(awaitable):  # noqa: ANN001, ANN202
    return await awaitable


def test_text_decoder_utf8_and_labels() -> None:
    data = TextEncoder.new().encode("h\u00e9\u20ac")
    assert TextDecoder.new().decode(data) == "h\u00e9\u20ac"
    assert TextDecoder.new("UTF8").encoding == "utf-8"
    assert TextDecoder.new("unicode-1-1-utf-8").decode(memoryview(b"ok")) == "ok"
    assert TextDecoder.new().decode() == ""
    assert TextDecoder.new().decode(b"\xef\xbb\xbfbom") == "bom"  # the BOM is dropped
    assert TextDecoder.new("utf-8", {"ignoreBOM": True}).decode(b"\xef\xbb\xbfx") == "\ufeffx"
    assert TextDecoder.new("utf-16le").decode("hi".encode("utf-16-le")) == "hi"
    # The latin1 labels are windows-1252, whose five unassigned bytes decode to themselves.
    assert TextDecoder.new("latin1").decode(b"\x80\x81\xe9") == "\u20ac\x81\u00e9"


def test_text_decoder_replaces_or_refuses_bad_bytes() -> None:
    assert TextDecoder.new().decode(b"a\xffb") == "a\ufffdb"
    fatal = TextDecoder.new("utf-8", {"fatal": True})
    assert fatal.fatal is True
    with pytest.raises(TypeError, match="not valid"):
        fatal.decode(b"a\xffb")
    with pytest.raises(JsException, match="'klingon'") as caught:
        TextDecoder.new("klingon")
    assert caught.value.name == "RangeError"


def test_text_decoder_streams_a_split_character() -> None:
    decoder = TextDecoder.new()
    euro = "\u20ac".encode()
    assert decoder.decode(euro[:2], {"stream": True}) == ""
    assert decoder.decode(euro[2:]) == "\u20ac"


def test_btoa_atob() -> None:
    assert btoa("hello") == "aGVsbG8="
    assert atob("aGVs bG8=") == "hello"
    assert atob(btoa("\u00ff\u0000")) == "\u00ff\u0000"
    with pytest.raises(JsException, match="Latin1") as caught:
        btoa("\u20ac")
    assert caught.value.name == "InvalidCharacterError"
    with pytest.raises(JsException) as caught:
        atob("a")
    assert caught.value.name == "InvalidCharacterError"


@pytest.mark.parametrize(
    ("algorithm", "hex_digest"),
    [
        ("SHA-1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("SHA-256", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ({"name": "sha-384"}, "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed"),
        ("SHA-512", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"),
    ],
)
def test_digest(algorithm: object, hex_digest: str) -> None:
    digest = run(SUBTLE.digest(algorithm, b"abc"))
    assert isinstance(digest, ArrayBuffer)  # a JsProxy of an ArrayBuffer under Pyodide
    assert bytes(digest.to_py()).hex().startswith(hex_digest)


def test_digest_refuses_an_unknown_algorithm() -> None:
    with pytest.raises(JsException, match="MD5") as caught:
        run(SUBTLE.digest("MD5", b"abc"))
    assert caught.value.name == "NotSupportedError"


def test_hmac_sign_verify_rfc4231() -> None:
    key = run(
        SUBTLE.importKey(
            "raw", b"Jefe", {"name": "HMAC", "hash": "SHA-256"}, False, ["sign", "verify"]
        )
    )
    assert (key.type, key.extractable, key.algorithm["name"]) == ("secret", False, "HMAC")
    assert key.algorithm["hash"] == {"name": "SHA-256"}
    data = TextEncoder.new().encode("what do ya want for nothing?")
    mac = run(SUBTLE.sign("HMAC", key, data))
    expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert bytes(mac).hex() == expected
    assert run(SUBTLE.verify({"name": "HMAC"}, key, mac, data)) is True
    assert run(SUBTLE.verify("HMAC", key, b"x" * 32, data)) is False


def test_hmac_key_usages_and_formats_are_checked() -> None:
    sign_only = run(
        SUBTLE.importKey("raw", b"k", {"name": "HMAC", "hash": "SHA-1"}, True, ["sign"])
    )
    with pytest.raises(JsException, match="verify") as caught:
        run(SUBTLE.verify("HMAC", sign_only, b"", b""))
    assert caught.value.name == "InvalidAccessError"
    with pytest.raises(JsException, match="jwk") as caught:
        run(SUBTLE.importKey("jwk", {}, {"name": "HMAC", "hash": "SHA-1"}, True, ["sign"]))
    assert caught.value.name == "NotSupportedError"
    with pytest.raises(JsException, match="hash"):
        run(SUBTLE.importKey("raw", b"k", {"name": "HMAC"}, True, ["sign"]))


@pytest.mark.parametrize("value", [b"hi", bytearray(b"hi"), 5, None])
def test_btoa_of_anything_but_a_string_is_a_type_error(value: object) -> None:
    """Not the base64 of its repr (``btoa(b"hi")`` gave that of "b'hi'")."""
    with pytest.raises(TypeError, match="btoa"):
        btoa(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["QQ=", "QQ=\u00a0", "\u00a0QQ==", "QQ==\v", "QQ=A", b"QQ==", 5])
def test_atob_refuses_what_forgiving_base64_refuses(text: object) -> None:
    """Only ASCII whitespace (tab, LF, FF, CR, space) is skipped; "=" pads only a length that
    is a multiple of 4 (``"QQ="`` was accepted); a non-string is refused."""
    with pytest.raises(JsException) as caught:
        atob(text)  # type: ignore[arg-type]
    assert caught.value.name == "InvalidCharacterError"


def test_atob_skips_ascii_whitespace_and_takes_unpadded_text() -> None:
    assert atob(" Q\tQ\n=\f=\r") == "A"
    assert atob("QQ") == "A"
    assert atob("QUI") == "AB"


def test_timing_safe_equal_takes_buffers_only() -> None:
    with pytest.raises(TypeError, match="timingSafeEqual"):
        SUBTLE.timingSafeEqual(3, 3)  # type: ignore[arg-type]
    assert SUBTLE.timingSafeEqual(b"ab", bytearray(b"ab")) is True


def test_text_decoder_drops_a_bom_after_a_fatal_error() -> None:
    """A fatal error ends the stream: the next decode starts a new one, BOM and all."""
    decoder = TextDecoder("utf-8", {"fatal": True})
    assert decoder.decode(b"\xef\xbb\xbfa", {"stream": True}) == "a"
    with pytest.raises(JsException):
        decoder.decode(b"\xff", {"stream": True})
    assert decoder.decode(b"\xef\xbb\xbfb") == "b"


def test_windows_1252_decodes_as_the_whatwg_table() -> None:
    raw = bytes(range(256))
    text = TextDecoder("windows-1252").decode(raw)
    assert len(text) == 256
    assert text[0x80] == "\u20ac" and text[0x81] == "\x81" and text[0x9F] == "\u0178"
    assert text[0x41] == "A" and text[0xFF] == "\u00ff"


def test_hmac_import_refuses_an_empty_key_and_usages_given_as_a_string() -> None:
    hmac_sha1 = {"name": "HMAC", "hash": "SHA-1"}
    with pytest.raises(JsException) as caught:
        run(SUBTLE.importKey("raw", b"", hmac_sha1, True, ["sign"]))
    assert caught.value.name == "DataError"
    with pytest.raises(TypeError, match="usages"):
        run(SUBTLE.importKey("raw", b"k", hmac_sha1, True, "sign"))


SIGNING = """
from pyodide.ffi import to_js as _to_js
from js import Response, URL, TextEncoder, Object, crypto, btoa, atob

def to_js(x):
    return _to_js(x, dict_converter=Object.fromEntries)

encoder = TextEncoder.new()

async def on_fetch(request, env):
    key = await crypto.subtle.importKey(
        "raw",
        encoder.encode("my secret symmetric key"),
        to_js({"name": "HMAC", "hash": "SHA-256"}),
        False,
        ["sign", "verify"],
    )
    url = URL.new(request.url)
    if url.pathname.startswith("/generate/"):
        path = url.pathname.replace("/generate/", "/", 1)
        mac = await crypto.subtle.sign("HMAC", key, encoder.encode(path))
        return Response.new(btoa("".join(map(chr, mac.to_bytes()))))
    received = bytes(ord(c) for c in atob(url.searchParams.get("verify")))
    ok = await crypto.subtle.verify("HMAC", key, received, encoder.encode(url.pathname))
    digest = await crypto.subtle.digest("SHA-256", encoder.encode(url.pathname))
    return Response.new(f"{ok} {bytes(digest.to_py()).hex()[:8]}")
"""


def test_signing_requests_flow_in_a_worker(harness: Harness, tmp_path: Path) -> None:
    """The calls the docs' signing-requests example makes (with ``btoa``/``atob`` where the
    published page has ``Buffer.from``, a Python syntax error), from ``js`` in an isolate."""
    deployment_id = harness.deploy(write_project(tmp_path / "signing", SIGNING))
    with harness.client(deployment_id) as client:
        mac = client.get("/generate/doc").text
        good = client.get("/doc", params={"verify": mac})
        bad = client.get("/other", params={"verify": mac})
    assert good.text.startswith("True "), good.text
    assert bad.text.startswith("False "), bad.text
