"""Accounts' limits on ember serve, each refused with a clear error: temporary accounts'
(``platform.temporary``), permanent ones' (``platform.accounts``), and a claim switching from
the first to the second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import ServeProcess, permanent_account, put_worker, temporary_account

CONFIG = """\
platform:
  proof_of_work: {k: 64, g: 64, sample: 8}
  temporary:
    max_workers: 2
    max_script_size: 4KiB
    max_kv_bytes: 2KiB
    cpu_ms_per_request: 50
    ai_requests_per_minute: 2
  accounts:
    max_workers: 3
    max_kv_bytes: 4KiB
    cpu_ms_per_request: 1000
    ai_requests_per_minute: 3
"""
WORKER = """\
import asyncio
import time
from workers import Response

async def on_fetch(request, env):
    if "/ai" in request.url:
        codes = []
        for _ in range(int(request.url.rsplit("/ai", 1)[1] or 3)):
            try:
                await env.AI.run("@cf/ember/no-such-model", {"prompt": "hi"})
            except Exception as exc:
                codes.append(str(exc).split(":")[0])
        return Response(" ".join(codes))
    if "/spin" in request.url:
        end = time.process_time() + (1.5 if request.url.endswith("/spin-long") else 0.3)
        while time.process_time() < end:
            pass
        return Response("spun")
    for attempt in range(8):  # one write per second to a key: retry a 429 (key_rate.py)
        try:
            await env.KV.put("big", "y" * 1500)
        except Exception as exc:
            if "429" in str(exc) and attempt < 7:
                await asyncio.sleep(0.25)
                continue
            return Response(f"refused: {exc}", status=507)
        return Response("stored")
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("limits") / "state", CONFIG)
    yield process
    process.stop()


def test_temporary_limits_and_claim(limited: ServeProcess, tmp_path: Path) -> None:
    created = temporary_account(limited)
    account = created["account"]  # type: ignore[index]
    account_id, name = account["id"], account["name"]  # type: ignore[index]
    with limited.api(account["apiToken"]) as api:  # type: ignore[index]
        namespace = api.post(
            f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"}
        ).json()["result"]["id"]
        binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "one", WORKER, bindings=binding).status_code == 200

        # KV bytes, through the REST API ...
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        assert api.put(f"{values}/a", content=b"x" * 1000).status_code == 200
        refused = api.put(f"{values}/b", content=b"x" * 1200)
        assert refused.status_code == 413
        error = refused.json()["errors"][0]
        assert error["code"] == 10024 and "2,048 bytes" in error["message"]
        # ... and through the worker's binding: the same limit, the same words.
        reply = limited.worker(name, "one")
        assert reply.status_code == 507 and "2,048 bytes" in reply.text
        assert api.get(f"{values}/b").status_code == 404
        assert api.get(f"{values}/big").status_code == 404

        # CPU per request.
        spun = limited.worker(name, "one", "/spin")
        assert spun.status_code == 503 and "exceeded CPU time limit" in spun.text

        # AI requests per minute, counted per account (checked before the model is even looked
        # up, so an unknown model id makes the two allowed requests fail fast with 5007): the
        # worker's env.AI ...
        ai_binding = [*binding, {"name": "AI", "type": "ai"}]
        assert put_worker(api, account_id, "two", WORKER, bindings=ai_binding).status_code == 200
        assert limited.worker(name, "two", "/ai").text == "5007 5007 3036"
        # ... and the REST API share the account's budget: it is spent.
        run = f"/accounts/{account_id}/ai/run/@cf/ember/no-such-model"
        limited_reply = api.post(run, json={"prompt": "hi"})
        assert limited_reply.status_code == 429
        assert "2 AI requests per minute" in limited_reply.json()["errors"][0]["message"]

        # Script size and number of workers.
        big = put_worker(api, account_id, "big", WORKER + "#" * 5000)
        assert big.status_code == 413 and big.json()["errors"][0]["code"] == 10027
        assert "4,096 bytes" in big.json()["errors"][0]["message"]
        third = put_worker(api, account_id, "three", WORKER, bindings=binding)
        assert third.status_code == 403 and third.json()["errors"][0]["code"] == 10037
        assert "at most 2" in third.json()["errors"][0]["message"]

    # Claiming makes the account permanent: the limits of permanent accounts apply at once.
    claim_token = created["claim"]["token"]  # type: ignore[index]
    with limited.api() as anonymous:
        claimed = anonymous.post("/provisioning/previews/claim", json={"claimToken": claim_token})
    assert claimed.status_code == 200, claimed.text
    assert limited.worker(name, "one", "/spin").text == "spun"  # 300 ms: within 1000
    assert limited.worker(name, "one").text == "stored"  # 2.5 KiB in all: within 4 KiB
    with limited.api(claimed.json()["result"]["apiToken"]) as owner:
        assert put_worker(owner, account_id, "three", WORKER, bindings=binding).status_code == 200
        fourth = put_worker(owner, account_id, "four", WORKER, bindings=binding)
    assert fourth.status_code == 403 and fourth.json()["errors"][0]["code"] == 10037
    assert "platform.accounts.max_workers" in fourth.json()["errors"][0]["message"]


def test_permanent_accounts_limits(limited: ServeProcess) -> None:
    account_id, token = permanent_account(limited, "acme")
    with limited.api(token) as api:
        namespace = api.post(
            f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"}
        ).json()["result"]["id"]
        binding = [
            {"name": "KV", "type": "kv_namespace", "namespace_id": namespace},
            {"name": "AI", "type": "ai"},
        ]
        assert put_worker(api, account_id, "one", WORKER, bindings=binding).status_code == 200
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        assert api.put(f"{values}/a", content=b"x" * 3000).status_code == 200

        # KV bytes through the worker's binding: platform.accounts.max_kv_bytes, and how to
        # raise it (the REST side: tests/platform/test_account_limits.py).
        reply = limited.worker("acme", "one")
        assert reply.status_code == 507 and "its limit is 4,096 bytes" in reply.text
        assert "raise platform.accounts.max_kv_bytes" in reply.text
        assert api.get(f"{values}/big").status_code == 404

        # CPU per request: 1.5 s is past platform.accounts.cpu_ms_per_request (1000 ms).
        spun = limited.worker("acme", "one", "/spin-long")
        assert spun.status_code == 503 and "exceeded CPU time limit" in spun.text

        # AI requests per minute: env.AI and the REST API share the account's 3.
        assert limited.worker("acme", "one", "/ai4").text == "5007 5007 5007 3036"
        run = f"/accounts/{account_id}/ai/run/@cf/ember/no-such-model"
        refused = api.post(run, json={"prompt": "hi"})
        assert refused.status_code == 429
        message = refused.json()["errors"][0]["message"]
        assert "3 AI requests per minute" in message
        assert "raise platform.accounts.ai_requests_per_minute" in message


def test_listing_models_spends_none_of_a_temporary_accounts_ai_requests(
    limited: ServeProcess,
) -> None:
    # ember deploy reads ai/models/search for its ai.models note: a deploy (or any look at the
    # catalog) must leave the account's AI requests per minute for inference.
    account = temporary_account(limited)["account"]
    account_id = account["id"]  # type: ignore[index]
    ai = f"/accounts/{account_id}/ai"
    with limited.api(account["apiToken"]) as api:  # type: ignore[index]
        for path in ("/models/search", "/v1/models", "/tasks/search", "/authors/search"):
            for _ in range(3):
                listed = api.get(ai + path)
                assert listed.status_code == 200, (path, listed.text)
        codes = [
            api.post(f"{ai}/run/@cf/ember/no-such-model", json={"prompt": "hi"}).status_code
            for _ in range(3)
        ]
    assert codes == [400, 400, 429], codes
