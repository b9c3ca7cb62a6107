"""``ember serve --log-requests``: a line per AI API call, naming its answer's request id."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.bindings.ai.support import wait_until
from tests.serve.conftest import ServeProcess, permanent_account, tiny_ai_config

MODEL = "@cf/zai-org/glm-4.7-flash"
CONFIG = tiny_ai_config(MODEL)


def test_each_ai_call_is_a_line_naming_its_request_id(tmp_path: Path) -> None:
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
        refused = httpx.post(f"{serve.url}/client/v4/accounts/{account}/ai/run/{MODEL}", json={})
        assert refused.status_code in (401, 403)
        path = f"/client/v4/accounts/{account}/ai/run/{MODEL}"
        wait_until(lambda: f"AI POST {path} 200 req={request_id}" in serve.output(), "the line")
        listed_line = f"AI GET /client/v4/accounts/{account}/ai/models/search 200"
        wait_until(lambda: listed_line in serve.output(), "the listing's line")
        refused_line = f"AI POST {path} {refused.status_code}"
        wait_until(lambda: refused_line in serve.output(), "the refused call's line")
        missing = serve.worker("acme", "nobody", "/")
        assert missing.status_code == 404
        wait_until(lambda: "GET nobody.acme 404" in serve.output(), "the worker's line")
        assert "GET nobody.acme 404 (0.0ms) [not live]" in serve.output()
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
    assert "AI GET" not in serve.output()
