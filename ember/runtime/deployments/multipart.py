"""A strict ``multipart/form-data`` parser for worker and KV uploads.

Written for this job rather than borrowed: uploads are already read into memory under a size limit,
and what matters here is the exact field/filename/content-type of each part (wrangler names module
parts after the module, the SDK names them all ``files``; only the filename is reliable). Anything
malformed is a ``InvalidUpload`` that says what was wrong, never a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ember.runtime.deployments.errors import InvalidUpload

MAX_PARTS = 10_000
MAX_HEADER_BYTES = 16 * 1024
_PARAM = re.compile(r';\s*([A-Za-z0-9_*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')
# WHATWG FormData percent-escapes these three in names and filenames (undici, browsers).
_FORM_ESCAPES = {"%22": '"', "%0D": "\r", "%0A": "\n"}


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    content_type: str | None
    data: bytes = field(repr=False)


def boundary_of(content_type: str | None) -> bytes:
    """The boundary parameter of a multipart Content-Type header."""
    if not content_type or not content_type.lower().startswith("multipart/form-data"):
        raise InvalidUpload(
            f"expected Content-Type multipart/form-data with a boundary, got {content_type!r}"
        )
    params = _params(content_type[len("multipart/form-data") :])
    boundary = params.get("boundary")
    if not boundary or len(boundary) > 200:
        raise InvalidUpload("the multipart Content-Type has no usable boundary parameter")
    return boundary.encode("latin-1")


def parse_multipart(body: bytes, content_type: str | None) -> list[Part]:
    boundary = boundary_of(content_type)
    delimiter = b"--" + boundary
    start = body.find(delimiter)
    if start < 0:
        raise InvalidUpload("malformed multipart body: the boundary never appears")
    position = start + len(delimiter)
    parts: list[Part] = []
    while True:
        if body.startswith(b"--", position):
            return parts
        if not body.startswith(b"\r\n", position):
            raise InvalidUpload("malformed multipart body: a boundary is not followed by CRLF")
        position += 2
        end = body.find(b"\r\n" + delimiter, position)
        if end < 0:
            raise InvalidUpload(
                "malformed multipart body: the closing boundary is missing (truncated upload?)"
            )
        parts.append(_part(body[position:end], len(parts)))
        if len(parts) > MAX_PARTS:
            raise InvalidUpload(f"too many multipart parts (more than {MAX_PARTS})")
        position = end + 2 + len(delimiter)


def _part(raw: bytes, index: int) -> Part:
    split = raw.find(b"\r\n\r\n")
    if raw.startswith(b"\r\n"):  # a part with no headers at all
        split, header_block, data = 0, b"", raw[2:]
    elif split < 0 or split > MAX_HEADER_BYTES:
        raise InvalidUpload(f"malformed multipart part #{index + 1}: no blank line after headers")
    else:
        header_block, data = raw[:split], raw[split + 4 :]
    headers: dict[str, str] = {}
    for line in header_block.decode("utf-8", "replace").split("\r\n"):
        if not line:
            continue
        if ":" not in line:
            raise InvalidUpload(f"malformed multipart part #{index + 1}: bad header line {line!r}")
        key, value = line.split(":", 1)
        headers[key.strip().lower()] = value.strip()
    disposition = headers.get("content-disposition", "")
    if not disposition.lower().startswith("form-data"):
        raise InvalidUpload(f"multipart part #{index + 1} has no Content-Disposition: form-data")
    params = _params(disposition[len("form-data") :])
    name = params.get("name")
    if name is None:
        raise InvalidUpload(f"multipart part #{index + 1} has no name")
    filename = params.get("filename")
    if "filename*" in params:  # RFC 5987: UTF-8''percent-encoded
        from urllib.parse import unquote

        encoded = params["filename*"]
        filename = unquote(encoded.split("''", 1)[-1])
    return Part(
        name=_unescape(name),
        filename=_unescape(filename) if filename is not None else None,
        content_type=headers.get("content-type"),
        data=data,
    )


def _params(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _PARAM.findall(text):
        value = value.strip()
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out[key.lower()] = value
    return out


def _unescape(text: str) -> str:
    for escaped, plain in _FORM_ESCAPES.items():
        text = text.replace(escaped, plain).replace(escaped.lower(), plain)
    return text


def build_multipart(parts: list[Part], boundary: str) -> bytes:
    """Encode parts (the client side of ``ember deploy``; also a reference for tests)."""
    chunks: list[bytes] = []
    for part in parts:
        disposition = f'form-data; name="{_escape(part.name)}"'
        if part.filename is not None:
            disposition += f'; filename="{_escape(part.filename)}"'
        head = f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
        if part.content_type:
            head += f"Content-Type: {part.content_type}\r\n"
        chunks += [head.encode("utf-8"), b"\r\n", part.data, b"\r\n"]
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks)


def _escape(text: str) -> str:
    return text.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
