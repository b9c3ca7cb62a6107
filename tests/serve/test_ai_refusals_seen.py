"""AI calls refused before the gateway runs them are counted and logged like every other AI
call: REST ``ai/run`` and ``/ai/v1`` refused for their body or ``options`` (and a chat without a
model), and a worker's ``env.AI.run`` refused for its options, each appear in
``ember_ai_requests_total`` with their status and code and get their ``AI call`` line."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from ember.models.server.metrics import parse_prometheus
from tests.bindings.ai.support import wait_until
from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

GLM = "@cf/zai-org/glm-4.7-flash"
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.AI.run("{GLM}", {{"prompt": "hi"}}, {{"prefix": 5}})
    except Exception as exc:
        return Response(str(exc), status=400)
    return Response("asked")
"""


def _lines(serve: ServeProcess, pattern: str, count: int, what: str) -> None:
    found: list[str] = []

    def seen() -> bool:
        found[:] = re.findall(rf"^{pattern}$", serve.output(), re.MULTILINE)
        return len(found) >= count

    wait_until(seen, what)
    assert len(found) == count, found


def test_refusals_before_the_gateway_are_counted_and_logged(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path / "state", tiny_ai_config(GLM), "--metrics-port", "0", "--log-requests"
    )
    try:
        account_id, token = permanent_account(serve, "acme")
        ai = f"/accounts/{account_id}/ai"
        with serve.api(token) as api:
            bad_option = api.post(
                f"{ai}/run/{GLM}", json={"prompt": "hi", "options": {"prefix": 5}}
            )
            not_json = api.post(f"{ai}/run/{GLM}", content=b"{nope")
            chat_option = api.post(
                f"{ai}/v1/chat/completions",
                json={"model": GLM, "messages": [], "options": {"prefix": 5}},
            )
            no_model = api.post(f"{ai}/v1/chat/completions", json={"messages": []})
            unknown_previous = api.post(
                f"{ai}/v1/responses",
                json={"model": GLM, "input": "x", "previous_response_id": "resp_nope"},
            )
            bindings = [{"name": "AI", "type": "ai"}]
            assert (
                put_worker(api, account_id, "asker", WORKER, bindings=bindings).status_code == 200
            )
        worker = serve.worker("acme", "asker")
        for reply in (bad_option, not_json, chat_option, no_model, worker):
            assert reply.status_code == 400, reply.text
        assert unknown_previous.status_code == 404, unknown_previous.text

        found = re.search(r"Metrics on (http://\S+/metrics)", serve.output())
        assert found, serve.output()
        samples = parse_prometheus(httpx.get(found.group(1), timeout=30).text)
        counted = {k: v for k, v in samples.items() if k.startswith("ember_ai_requests_total")}
        assert counted == {
            # bad options (REST, /ai/v1, the worker's) and a body that is not JSON
            f'ember_ai_requests_total{{model="{GLM}",status="400",code="5006"}}': 4,
            # the chat that names no model: counted, under no model
            'ember_ai_requests_total{model="(unknown)",status="400",code="5006"}': 1,
            # /ai/v1/responses chaining onto a response that does not exist
            f'ember_ai_requests_total{{model="{GLM}",status="404",code="5006"}}': 1,
        }, counted

        call = r"AI call account=acme worker={worker} model={model} status=400 code=5006"
        done = r" tokens=-/- req=- \(\d+\.\dms\)"
        rest = call.format(worker="-", model=re.escape(GLM))
        _lines(serve, rf"{STAMP} {rest}{done}", 3, "the REST refusals' AI call lines")
        _lines(serve, rf"{STAMP} {call.format(worker='-', model='')}{done}", 1, "no model's")
        unknown = rest.replace("status=400", "status=404")
        _lines(serve, rf"{STAMP} {unknown}{done}", 1, "the unknown previous response's line")
        asker = call.format(worker="asker", model=re.escape(GLM))
        _lines(serve, rf"{STAMP} {asker}{done}", 1, "the worker's refused call")
    finally:
        serve.stop()
