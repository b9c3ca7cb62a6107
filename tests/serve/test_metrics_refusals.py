"""``ember_ai_requests_total`` counts the AI calls an account's per-minute cap refuses: a
worker's ``env.AI.run`` (3036, HTTP 429) and the REST routes (971, HTTP 429), each under the
model it asked for, as the gateway counts every other failure."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from ember.models.server.metrics import parse_prometheus
from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

GLM = "@cf/zai-org/glm-4.7-flash"
# Two AI requests per minute for permanent accounts: the third of a minute is refused.
CONFIG = tiny_ai_config(GLM).replace(
    "platform:\n", "platform:\n  accounts:\n    ai_requests_per_minute: 2\n", 1
)
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    codes = []
    for _ in range(3):
        try:
            await env.AI.run("{GLM}", {{"prompt": "hi", "max_tokens": 1}})
            codes.append("ok")
        except Exception as exc:
            codes.append(str(exc).split(":")[0])
    return Response(" ".join(codes))
"""


def test_rate_limited_ai_calls_are_counted_with_their_status_and_code(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG, "--metrics-port", "0")
    try:
        account_id, token = permanent_account(serve, "capped")
        with serve.api(token) as api:
            bindings = [{"name": "AI", "type": "ai"}]
            assert (
                put_worker(api, account_id, "asker", WORKER, bindings=bindings).status_code == 200
            )
            assert serve.worker("capped", "asker").text == "ok ok 3036"
            # The account's two are spent: the REST routes are refused too, the model named in
            # the path (ai/run) or in the body (the OpenAI-compatible route).
            ai = f"/accounts/{account_id}/ai"
            run = api.post(f"{ai}/run/{GLM}", json={"prompt": "hi"})
            chat = api.post(f"{ai}/v1/chat/completions", json={"model": GLM, "messages": []})
        assert run.status_code == 429 and run.json()["errors"][0]["code"] == 971, run.text
        assert chat.status_code == 429, chat.text

        found = re.search(r"Metrics on (http://\S+/metrics)", serve.output())
        assert found, serve.output()
        samples = parse_prometheus(httpx.get(found.group(1), timeout=30).text)
        counted = {k: v for k, v in samples.items() if k.startswith("ember_ai_requests_total")}
        assert counted == {
            f'ember_ai_requests_total{{model="{GLM}",status="200",code="0"}}': 2,
            f'ember_ai_requests_total{{model="{GLM}",status="429",code="3036"}}': 1,
            f'ember_ai_requests_total{{model="{GLM}",status="429",code="971"}}': 2,
        }, counted
    finally:
        serve.stop()
