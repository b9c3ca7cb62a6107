"""A request the isolate protocol cannot carry is refused by the supervisor, not sent.

The protocol bounds a request's URL (16 KiB, Cloudflare's URL limit) and its headers (1,000, as
the frame decoder checks). The server's own head bound is larger (128 KiB), so a client could
send a head within it that the isolate's decoder refused: the isolate exited ("crashed"), and
with it every other request it was serving. The supervisor answers 414 / 431 instead.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tests.runtime.harness import Harness, write_project

SLOW = """
import asyncio
from workers import Response

async def fetch(request, env, ctx):
    if request.headers.get("x-kind") == "slow":
        await asyncio.sleep(1.0)
    return Response("url " + str(len(request.url)))
"""


def test_a_url_or_headers_past_the_protocol_are_refused_and_cost_no_other_request(
    harness: Harness, tmp_path: Path
) -> None:
    deployment_id = harness.deploy(write_project(tmp_path / "heads", SLOW))
    with harness.client(deployment_id, timeout=30) as client:
        assert client.get("/").status_code == 200  # started
        slow: dict[str, object] = {}

        def run_slow() -> None:
            reply = client.get("/", headers={"x-kind": "slow"})
            slow["reply"] = (reply.status_code, reply.text)

        beside = threading.Thread(target=run_slow)
        beside.start()
        fits = client.get("/?q=" + "a" * 16_000)
        too_long = client.get("/?q=" + "a" * 17_000)
        many = client.get("/", headers=[(f"x-h{i}", "v") for i in range(1_001)])
        beside.join()
        after = client.get("/")
    assert fits.status_code == 200 and fits.text.startswith("url ")
    assert (too_long.status_code, too_long.headers["x-ember-error"]) == (414, "url_too_long")
    assert "16 KiB" in too_long.text
    assert (many.status_code, many.headers["x-ember-error"]) == (431, "request_headers_too_large")
    assert "1000 headers" in many.text
    # The isolate served on: the request beside them was not lost with it.
    assert slow["reply"] == (200, slow["reply"][1]) and str(slow["reply"][1]).startswith("url ")
    assert after.status_code == 200
