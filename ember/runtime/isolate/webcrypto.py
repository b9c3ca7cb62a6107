"""``crypto.subtle``: ``digest`` (SHA-1/256/384/512), HMAC ``importKey`` / ``sign`` /
``verify`` on raw keys, and Workers' ``timingSafeEqual``.

As on workerd the WebCrypto methods return promises (``await crypto.subtle.digest(...)``) and
their results are ``ArrayBuffer``s (``to_py()`` a memoryview, ``to_bytes()`` bytes); errors are
the DOMExceptions workerd throws, by name. Other algorithms and key formats (AES, ECDSA, RSA,
``jwk``) are refused with ``NotSupportedError`` naming what ember has: Python's
``cryptography`` package does them in ember's environment.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from ember.js_errors import JsException, JsTypeError
from ember.runtime.isolate.buffers import ArrayBuffer

HASHES = {"SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}
PROVIDED = "digest (SHA-1/256/384/512), HMAC importKey('raw')/sign/verify, timingSafeEqual"


class NotSupportedError(JsException):
    """The DOMException for an algorithm or key format the runtime does not implement."""

    name = "NotSupportedError"


class DataError(JsException):
    """The DOMException for key data the algorithm cannot use (an empty HMAC key)."""

    name = "DataError"


class InvalidAccessError(JsException):
    """The DOMException for a key used for what its usages do not allow."""

    name = "InvalidAccessError"


def _field(value: Any, key: str) -> Any:
    """A member of a dict (``to_js(..., dict_converter=Object.fromEntries)``) or an object."""
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


def _name(algorithm: Any, what: str) -> str:
    """An algorithm identifier's name: a string, or a dict / object with ``name``."""
    if isinstance(algorithm, str):
        return algorithm
    name = _field(algorithm, "name")
    if not isinstance(name, str):
        raise JsTypeError(f"{what}: expected an algorithm name or an object with a name")
    return name


def _hash(algorithm: Any, what: str) -> str:
    """A hash algorithm's standard name (case-insensitive, as WebCrypto matches them)."""
    name = _name(algorithm, what).upper()
    if name not in HASHES:
        raise NotSupportedError(
            f"Unrecognized or unimplemented digest algorithm requested: {name} (ember has "
            f"{', '.join(HASHES)})"
        )
    return name


def _bytes(data: Any, what: str) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise JsTypeError(
        f"{what}: expected an ArrayBuffer or ArrayBufferView (bytes, Uint8Array), "
        f"got {type(data).__name__}"
    )


class CryptoKey:
    """An HMAC secret key (``importKey`` gives it; ``sign`` / ``verify`` use it)."""

    type = "secret"

    def __init__(self, secret: bytes, hash_name: str, extractable: bool, usages: list[str]):
        self._secret = secret
        self.algorithm = {"name": "HMAC", "hash": {"name": hash_name}, "length": len(secret) * 8}
        self.extractable = bool(extractable)
        self.usages = usages

    def __repr__(self) -> str:  # never the secret
        return f"CryptoKey(HMAC, {self.algorithm['hash']['name']}, usages={self.usages})"

    def _mac(self, data: bytes, usage: str) -> bytes:
        if usage not in self.usages:
            raise InvalidAccessError(
                f"Requested key usage {usage!r} does not match the key's usages {self.usages}"
            )
        digest = HASHES[self.algorithm["hash"]["name"]]
        return hmac.new(self._secret, data, digest).digest()


def _key(key: Any, algorithm: Any, what: str) -> CryptoKey:
    if not isinstance(key, CryptoKey):
        raise JsTypeError(f"{what}: expected a CryptoKey from crypto.subtle.importKey")
    name = _name(algorithm, what)
    if name.upper() != "HMAC":
        raise NotSupportedError(f"{what}: unsupported algorithm {name} (ember has {PROVIDED})")
    return key


class SubtleCrypto:
    """``crypto.subtle``, the part of it ember has (module docstring)."""

    async def digest(self, algorithm: Any, data: Any) -> ArrayBuffer:
        name = _hash(algorithm, "crypto.subtle.digest")
        return ArrayBuffer(hashlib.new(HASHES[name], _bytes(data, "digest")).digest())

    async def importKey(  # noqa: N802 - the JavaScript name
        self,
        key_format: str,
        key_data: Any,
        algorithm: Any,
        extractable: bool,
        usages: Any,
    ) -> CryptoKey:
        what = "crypto.subtle.importKey"
        name = _name(algorithm, what)
        if name.upper() != "HMAC":
            raise NotSupportedError(f"{what}: unsupported algorithm {name} (ember has {PROVIDED})")
        if key_format != "raw":
            raise NotSupportedError(
                f"{what}: key format {key_format!r} is not supported by ember for HMAC, only "
                "'raw' (pass the secret's bytes)"
            )
        hash_id = _field(algorithm, "hash")
        if hash_id is None:
            raise JsTypeError(
                f"{what}: HMAC needs a hash, e.g. {{'name': 'HMAC', 'hash': 'SHA-256'}}"
            )
        if isinstance(usages, str | bytes) or not hasattr(usages, "__iter__"):
            raise JsTypeError(
                f"{what}: usages must be a list of strings, e.g. ['sign', 'verify'], "
                f"got {type(usages).__name__} {usages!r}"
            )
        usage_list = [str(u) for u in usages]
        bad = [u for u in usage_list if u not in ("sign", "verify")]
        if bad:
            raise JsException(f"{what}: HMAC keys may only be used to sign and verify, not {bad}")
        secret = _bytes(key_data, what)
        if not secret:
            raise DataError(f"{what}: an HMAC key must not be empty")
        return CryptoKey(secret, _hash(hash_id, what), extractable, usage_list)

    async def sign(self, algorithm: Any, key: Any, data: Any) -> ArrayBuffer:
        hmac_key = _key(key, algorithm, "crypto.subtle.sign")
        return ArrayBuffer(hmac_key._mac(_bytes(data, "sign"), "sign"))

    async def verify(self, algorithm: Any, key: Any, signature: Any, data: Any) -> bool:
        hmac_key = _key(key, algorithm, "crypto.subtle.verify")
        expected = hmac_key._mac(_bytes(data, "verify"), "verify")
        return hmac.compare_digest(expected, _bytes(signature, "verify"))

    @staticmethod
    def timingSafeEqual(a: bytes, b: bytes) -> bool:  # noqa: N802 - the JavaScript name
        """Constant-time comparison; buffers of different lengths are workerd's TypeError."""
        left, right = _bytes(a, "timingSafeEqual"), _bytes(b, "timingSafeEqual")
        if len(left) != len(right):
            raise TypeError("Input buffers must have the same byte length.")
        return hmac.compare_digest(left, right)

    def __getattr__(self, name: str) -> None:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"crypto.subtle.{name} is not provided by ember (it has {PROVIDED}): use Python's "
            "cryptography package, or hmac / hashlib"
        )
