"""``ember serve --log-requests``: each line starts with when (ISO 8601, UTC); a worker's line
names its path (never the query); the AI HTTP API gets its access line, and every AI call, a
worker's ``env.AI.run`` as much as REST ``ai/run``, an ``AI call`` line naming account, worker,
model, status and code, tokens, request id and duration."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.bindings.ai.support import wait_until
from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

MODEL = "@cf/zai-org/glm-4.7-flash"
CONFIG = tiny_ai_config(MODEL)
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
WORKER = f"""\
from urllib.parse import urlsplit
from workers import Response

async def on_fetch(request, env):
    model = "{MODEL}" if urlsplit(request.url).path == "/ask" else "@cf/nobody/nothing"
    try:
        await env.AI.run(model, {{"prompt": "hi", "max_tokens": 2}})
    except Exception as exc:
        return Response(str(exc), status=400)
    return Response("asked")
"""


def _line(serve: ServeProcess, pattern: str, what: str) -> str:
    found: list[str] = []

    def seen() -> bool:
        found[:] = re.findall(rf"^{pattern}$", serve.output(), re.MULTILINE)
        return bool(found)

    wait_until(seen, what)
    return found[0]


def test_each_request_and_ai_call_is_a_stamped_line(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG, "--log-requests")
    try:
        account, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            ran = api.post(
                f"/accounts/{account}/ai/run/{MODEL}", json={"prompt": "hi", "max_tokens": 2}
            )
            assert ran.status_code == 200, ran.text
            request_id = ran.headers["cf-ai-req-id"]
            listed = api.get(f"/accounts/{account}/ai/models/search")
            assert listed.status_code == 200
            bindings = [{"name": "AI", "type": "ai"}]
            assert put_worker(api, account, "asker", WORKER, bindings=bindings).status_code == 200
        refused = httpx.post(f"{serve.url}/client/v4/accounts/{account}/ai/run/{MODEL}", json={})
        assert refused.status_code in (401, 403)
        asked = serve.worker("acme", "asker", "/ask?token=secret-in-query")
        assert asked.text == "asked"
        assert serve.worker("acme", "asker", "/typo").status_code == 400

        path = re.escape(f"/client/v4/accounts/{account}/ai/run/{MODEL}")
        _line(serve, rf"{STAMP} AI POST {path} 200 req={request_id} \(\d+\.\dms\)", "REST's line")
        rest_call = (
            rf"{STAMP} AI call account=acme worker=- model={re.escape(MODEL)} status=200 code=0 "
            rf"tokens=\d+/\d+ req={request_id} \(\d+\.\dms\)"
        )
        _line(serve, rest_call, "the REST call's AI line")
        listing = re.escape(f"/client/v4/accounts/{account}/ai/models/search")
        _line(
            serve,
            rf"{STAMP} AI GET {listing} 200 req=[0-9a-f]{{32}} \(\d+\.\dms\)",
            "the listing's line",
        )
        refused_id = refused.headers["x-request-id"]  # what its client got, in its line
        refused_line = rf"{STAMP} AI POST {path} {refused.status_code} req={refused_id} .*"
        _line(serve, refused_line, "the refused call")
        # The worker's env.AI.run: the same line, naming the worker; its refusal with its code.
        binding_call = (
            rf"{STAMP} AI call account=acme worker=asker model={re.escape(MODEL)} status=200 "
            r"code=0 tokens=\d+/\d+ req=[0-9a-f]{32} \(\d+\.\dms\)"
        )
        _line(serve, binding_call, "the binding call's AI line")
        _line(
            serve,
            rf"{STAMP} AI call account=acme worker=asker model=@cf/nobody/nothing status=400 "
            r"code=5007 tokens=-/- req=- \(\d+\.\dms\)",
            "the binding's refused call",
        )
        _line(serve, rf"{STAMP} GET asker\.acme /ask 200 \(\d+\.\dms\)", "the worker's line")
        missing = serve.worker("acme", "nobody", "/some/where?key=secret-in-query")
        assert missing.status_code == 404
        _line(serve, rf"{STAMP} GET nobody\.acme /some/where 404 \(0\.0ms\) \[not live\]", "404")
        assert "secret-in-query" not in serve.output()
    finally:
        serve.stop()


def test_without_the_flag_no_ai_lines(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG)
    try:
        account, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            assert api.get(f"/accounts/{account}/ai/models/search").status_code == 200
    finally:
        serve.stop()
    assert "AI GET" not in serve.output() and "AI call" not in serve.output()
