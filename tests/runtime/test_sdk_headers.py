"""``workers.Response`` / ``workers.fetch`` headers are Pyodide's ``FetchResponse.headers``: a
dict copy with lower-case names (workerd's SDK); ``js.Response`` / ``js.fetch`` keep the live,
case-insensitive JS ``Headers``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream

WORKER = """
import json
import js
from workers import Response, fetch

def probe(headers):
    out = {"type": type(headers).__name__, "lower": headers.get("content-type")}
    try:
        out["capital"] = headers["Content-Type"]
    except KeyError:
        out["capital"] = "KeyError"
    try:
        headers["x-added"] = "1"
    except TypeError:
        pass
    out["added"] = headers.get("x-added")
    return out

async def on_fetch(request, env):
    path = request.url.rsplit("/", 1)[1]
    up = request.headers["x-upstream"] + "/text?body=up&type=text/plain"
    sdk = await fetch(up)
    raw = await js.fetch(up)
    built = Response("b", headers={"Content-Type": "text/x"})
    if path == "passed":  # what reaches the client of a fetched response passed on
        sdk.headers["x-lost"] = "1"
        return sdk
    return Response(json.dumps({
        "sdk": probe(sdk.headers), "js": probe(raw.headers), "built": probe(built.headers),
        "sdk_again": sdk.headers.get("x-added"),
        "copied": dict(Response("c", headers=sdk.headers).headers),
    }))
"""


def test_sdk_response_headers_are_a_lower_case_copy(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(write_project(tmp_path / "sdkheaders", WORKER))
    upstream = Upstream()
    try:
        with harness.client(deployment_id) as client:
            headers = {"x-upstream": upstream.url}
            got = json.loads(client.get("/probe", headers=headers).text)
            passed = client.get("/passed", headers=headers)
    finally:
        upstream.close()
    assert got["sdk"] == {
        "type": "dict",
        "lower": "text/plain",
        "capital": "KeyError",
        "added": "1",
    }
    assert got["sdk_again"] is None  # the line above changed a copy, not the response
    assert got["built"]["capital"] == "KeyError"
    assert got["js"] == {
        "type": "Headers",
        "lower": "text/plain",
        "capital": "text/plain",
        "added": "1",
    }
    assert got["copied"]["x-powered-by"] == "up"
    assert got["copied"]["content-type"] == "text/plain"
    assert passed.headers["x-powered-by"] == "up" and "x-lost" not in passed.headers
