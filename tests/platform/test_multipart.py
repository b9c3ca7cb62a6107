"""The multipart parser against the standard library's MIME parser (the slow reference)."""

from __future__ import annotations

import email.parser
import email.policy
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.runtime.deployments.errors import InvalidUpload
from ember.runtime.deployments.multipart import Part, build_multipart, parse_multipart

names = st.text(
    st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters='"\\%'),
    min_size=1,
    max_size=30,
)
parts_strategy = st.lists(
    st.builds(
        Part,
        name=names,
        filename=st.none() | names,
        content_type=st.none()
        | st.sampled_from(
            [
                "text/x-python",
                "application/octet-stream",
                "application/json",
                "application/javascript+module",
            ]
        ),
        data=st.binary(max_size=300),
    ),
    max_size=6,
)


def reference_parse(body: bytes, boundary: str) -> list[Part]:
    """Parse with email's MIME machinery (slow, independent of our code)."""
    head = f'Content-Type: multipart/form-data; boundary="{boundary}"\r\n\r\n'.encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    out = []
    for sub in message.iter_parts():
        disposition = sub.get("content-disposition")
        params = dict(disposition.params)
        content_type = sub.get("content-type")
        data = sub.get_payload(decode=True) or b""
        out.append(
            Part(
                params["name"].replace("%22", '"'),
                params.get("filename"),
                str(content_type) if content_type else None,
                data,
            )
        )
    return out


@settings(max_examples=150, deadline=None)
@given(parts_strategy)
def test_parser_matches_reference_on_random_uploads(parts: list[Part]) -> None:
    boundary = "----ember" + os.urandom(8).hex()
    body = build_multipart(parts, boundary)
    ours = parse_multipart(body, f"multipart/form-data; boundary={boundary}")
    assert ours == parts
    reference = reference_parse(body, boundary)
    assert [(p.name, p.filename, p.data) for p in ours] == [
        (p.name, p.filename, p.data) for p in reference
    ]


def test_preamble_and_quoted_boundary_are_accepted() -> None:
    body = build_multipart([Part("a", "a.py", "text/x-python", b"x")], "b o")
    parsed = parse_multipart(b"preamble\r\n" + body, 'multipart/form-data; boundary="b o"')
    assert parsed == [Part("a", "a.py", "text/x-python", b"x")]


@pytest.mark.parametrize(
    "body, content_type, message",
    [
        (b"whatever", "application/json", "multipart/form-data"),
        (b"whatever", "multipart/form-data", "boundary"),
        (b"no boundary here", "multipart/form-data; boundary=XYZ", "never appears"),
        (
            b'--XYZ\r\nContent-Disposition: form-data; name="a"\r\n\r\ndata',
            "multipart/form-data; boundary=XYZ",
            "closing boundary",
        ),
        (
            b"--XYZ\r\nX-Nothing: 1\r\n\r\ndata\r\n--XYZ--",
            "multipart/form-data; boundary=XYZ",
            "Content-Disposition",
        ),
        (b"--XYZ junk", "multipart/form-data; boundary=XYZ", "CRLF"),
    ],
)
def test_malformed_bodies_get_clear_errors(body: bytes, content_type: str, message: str) -> None:
    with pytest.raises(InvalidUpload, match=message):
        parse_multipart(body, content_type)


def test_truncated_random_uploads_never_crash() -> None:
    rng = random.Random(7)
    body = build_multipart(
        [
            Part("metadata", None, None, b"{}"),
            Part("f", "entry.py", "text/x-python", os.urandom(200)),
        ],
        "BB",
    )
    for _ in range(200):
        cut = body[: rng.randrange(len(body))]
        try:
            parse_multipart(cut, "multipart/form-data; boundary=BB")
        except InvalidUpload:
            pass
