"""ember serve: a worker's ``env.AI`` and its account's REST API act for one account.

A batch queued on one side is polled on the other, a gateway log written by a REST call is read
with ``env.AI.gateway(id).getLog``, and a stored response id works on both; another account sees
none of them, over REST or from its own worker. ``getUrl`` names the account.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

# The tiny GLM checkpoint under a gpt-oss id: one replica answers chat and Responses inputs.
MODEL = "@cf/openai/gpt-oss-120b"
CONFIG = tiny_ai_config(MODEL)
PROMPT = {"prompt": "hi", "max_tokens": 2}
# One worker whose body says which env.AI call to make; its answer says what came back.
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    ask = await request.json()
    try:
        if "getLog" in ask:
            got = await env.AI.gateway("g").getLog(ask["getLog"])
        elif "getUrl" in ask:
            got = await env.AI.gateway("g").getUrl()
        else:
            got = await env.AI.run("{MODEL}", ask["inputs"], ask.get("options") or {{}})
        return Response.json({{"ok": True, "got": got, "log": env.AI.aiGatewayLogId}})
    except Exception as exc:
        return Response.json({{"ok": False, "error": f"{{type(exc).__name__}}: {{exc}}"}})
"""


@dataclass(frozen=True)
class Account:
    name: str
    id: str
    token: str


@dataclass(frozen=True)
class Scene:
    serve: ServeProcess
    a: Account
    b: Account

    def rest(self, who: Account, method: str, path: str, **kw: Any) -> Any:
        with self.serve.api(who.token) as api:
            return api.request(method, f"/accounts/{who.id}/ai{path}", timeout=300, **kw)

    def worker(self, who: Account, **ask: Any) -> dict[str, Any]:
        reply = self.serve.worker(who.name, "asker", method="POST", json=ask)
        assert reply.status_code == 200, reply.text
        return reply.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    serve = ServeProcess(tmp_path_factory.mktemp("ai-account") / "state", CONFIG)
    try:
        accounts = []
        for name in ("alpha", "beta"):
            account_id, token = permanent_account(serve, name)
            with serve.api(token) as api:
                bindings = [{"name": "AI", "type": "ai"}]
                put = put_worker(api, account_id, "asker", WORKER, bindings=bindings)
                assert put.status_code == 200, put.text
            accounts.append(Account(name, account_id, token))
        yield Scene(serve, *accounts)
    finally:
        serve.stop()


def _queued(reply: Any) -> str:
    assert reply.status_code == 200, reply.text
    return str(reply.json()["result"]["request_id"])


def test_a_batch_queued_over_rest_is_polled_by_the_accounts_worker(scene: Scene) -> None:
    batch = {"requests": [PROMPT]}
    request_id = _queued(scene.rest(scene.a, "POST", f"/run/{MODEL}?queueRequest=true", json=batch))
    polled = scene.worker(scene.a, inputs={"request_id": request_id})
    assert polled["ok"], polled
    assert polled["got"]["request_id"] == request_id
    # Another account: neither its REST API nor its worker knows the id.
    other = scene.rest(scene.b, "POST", f"/run/{MODEL}", json={"request_id": request_id})
    assert other.status_code == 400, other.text
    assert "no queued request" in other.text
    theirs = scene.worker(scene.b, inputs={"request_id": request_id})
    assert not theirs["ok"] and "no queued request" in theirs["error"], theirs


def test_a_batch_queued_by_a_worker_is_polled_over_its_accounts_rest(scene: Scene) -> None:
    queued = scene.worker(scene.b, inputs={"requests": [PROMPT]}, options={"queueRequest": True})
    assert queued["ok"], queued
    request_id = queued["got"]["request_id"]
    polled = scene.rest(scene.b, "POST", f"/run/{MODEL}", json={"request_id": request_id})
    assert polled.status_code == 200, polled.text
    assert polled.json()["result"]["request_id"] == request_id
    other = scene.rest(scene.a, "POST", f"/run/{MODEL}", json={"request_id": request_id})
    assert other.status_code == 400 and "no queued request" in other.text, other.text
    theirs = scene.worker(scene.a, inputs={"request_id": request_id})
    assert not theirs["ok"] and "no queued request" in theirs["error"], theirs


def test_a_gateway_log_of_a_rest_call_is_read_by_the_accounts_worker(scene: Scene) -> None:
    body = {**PROMPT, "options": {"gateway": {"id": "g"}}}
    ran = scene.rest(scene.a, "POST", f"/run/{MODEL}", json=body)
    assert ran.status_code == 200, ran.text
    log_id = ran.headers["cf-aig-log-id"]
    read = scene.worker(scene.a, getLog=log_id)
    assert read["ok"] and read["got"]["id"] == log_id, read
    theirs = scene.worker(scene.b, getLog=log_id)
    assert not theirs["ok"] and "not found" in theirs["error"], theirs


def test_a_gateway_log_of_a_worker_stays_its_accounts(scene: Scene) -> None:
    ran = scene.worker(scene.b, inputs=PROMPT, options={"gateway": {"id": "g"}})
    assert ran["ok"] and ran["log"], ran
    assert scene.worker(scene.b, getLog=ran["log"])["ok"]
    theirs = scene.worker(scene.a, getLog=ran["log"])
    assert not theirs["ok"] and "not found" in theirs["error"], theirs


def test_a_response_stored_over_rest_continues_in_the_accounts_worker(scene: Scene) -> None:
    made = scene.rest(
        scene.a,
        "POST",
        "/v1/responses",
        json={"model": MODEL, "input": "hi", "max_output_tokens": 2},
    )
    assert made.status_code == 200, made.text
    response_id = made.json()["id"]
    turn = {"input": "again", "max_output_tokens": 2, "previous_response_id": response_id}
    mine = scene.worker(scene.a, inputs=turn)
    assert mine["ok"], mine
    theirs = scene.worker(scene.b, inputs=turn)
    assert not theirs["ok"] and response_id in theirs["error"], theirs
    assert scene.rest(scene.b, "GET", f"/v1/responses/{response_id}").status_code == 404


def test_a_response_stored_by_a_worker_is_read_over_its_accounts_rest(scene: Scene) -> None:
    made = scene.worker(scene.b, inputs={"input": "hi", "max_output_tokens": 2})
    assert made["ok"], made
    response_id = made["got"]["id"]
    read = scene.rest(scene.b, "GET", f"/v1/responses/{response_id}")
    assert read.status_code == 200 and read.json()["id"] == response_id, read.text
    assert scene.rest(scene.a, "GET", f"/v1/responses/{response_id}").status_code == 404
    turn = {"input": "again", "max_output_tokens": 2, "previous_response_id": response_id}
    theirs = scene.worker(scene.a, inputs=turn)
    assert not theirs["ok"] and response_id in theirs["error"], theirs


def test_get_url_names_the_workers_account(scene: Scene) -> None:
    got = scene.worker(scene.a, getUrl=True)
    assert got["got"] == f"https://gateway.ai.cloudflare.com/v1/{scene.a.id}/g", got
