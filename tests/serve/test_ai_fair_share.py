"""ember serve: one account flooding a model cannot starve another account's ``env.AI.run``.

walk7's repro 03 as a test: the model runs 1 request and queues 4; two workers of the attacker
account keep calling it in loops. The attacker's account holds at most its share (the one slot
and 0.5 of the 4 queue places: three requests), so its next calls, from either worker or its
REST API, are refused with 3036 naming the limit, and the victim's calls queue in the places
left and are answered first.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx

from tests.serve.conftest import BASE_CONFIG, TINY_GLM, ServeProcess, permanent_account, put_worker

MODEL = "@cf/zai-org/glm-4.7-flash"
CONFIG = (
    BASE_CONFIG
    # The per-minute rates are lifted (the account's and each worker's): the test is about
    # slots, and the flood's retries would spend platform.accounts' 300 a minute in seconds.
    + f"""\
  accounts: {{ai_requests_per_minute: null}}
ai:
  limits: {{requests_per_minute: 100000, concurrent_requests: 256}}
  models:
    "{MODEL}":
      checkpoint: {TINY_GLM}
      max_running_requests: 1
      max_queued_requests: 4
      args: ["--torch-threads", "1", "--kv-cache-bytes", "16MiB"]
"""
)
# Each loop keeps asking until the test sets "stop"; a refusal is retried after a short pause
# (the box has two cores), a success at once.
HOG = f"""\
import asyncio, json
from workers import Response

async def on_fetch(request, env):
    if request.url.endswith("/stop"):
        await env.KV.put("stop", "1")
        return Response("stopping")

    async def one():
        seen = {{"ok": 0, "refused": []}}
        for _ in range(100000):
            if await env.KV.get("stop"):
                break
            try:
                await env.AI.run("{MODEL}", {{"prompt": "tell me a story", "max_tokens": 64}})
                seen["ok"] += 1
            except Exception as exc:
                seen["refused"].append(str(exc)[:300])
                await asyncio.sleep(0.05)
        seen["refused"] = sorted(set(seen["refused"]))
        return seen

    return Response(json.dumps(await asyncio.gather(one(), one())))
"""
ONCE = f"""\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.AI.run("{MODEL}", {{"prompt": "hi", "max_tokens": 4}})
        return Response("ok")
    except Exception as exc:
        return Response(str(exc)[:400], status=429)
"""


def _kv(api: httpx.Client, account: str) -> str:
    reply = api.post(f"/accounts/{account}/storage/kv/namespaces", json={"title": "flags"})
    return reply.json()["result"]["id"]


def _until_refused(ask, tries: int = 600) -> str:  # noqa: ANN001
    """Ask until a refusal comes back (the flood holds the account's share); its text."""
    for _ in range(tries):
        status, text = ask()
        if status == 429:
            return text
        time.sleep(0.05)
    raise AssertionError("the attacker's account was never at its cap")


def test_a_flooding_account_cannot_starve_another(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG)
    floods: list[httpx.Response] = []
    try:
        victim, victim_token = permanent_account(serve, "victim")
        attacker, attacker_token = permanent_account(serve, "attacker")
        ai = {"name": "AI", "type": "ai"}
        with serve.api(victim_token) as api:
            assert put_worker(api, victim, "ask", ONCE, bindings=[ai]).status_code == 200
        with serve.api(attacker_token) as api:
            kv = {"name": "KV", "type": "kv_namespace", "namespace_id": _kv(api, attacker)}
            for name in ("hog", "hog2"):
                assert put_worker(api, attacker, name, HOG, bindings=[ai, kv]).status_code == 200
            assert put_worker(api, attacker, "probe", ONCE, bindings=[ai]).status_code == 200
        assert serve.worker("victim", "ask").text == "ok"  # the model is loaded

        def flood(name: str) -> None:
            host = {"host": f"{name}.attacker.localhost"}
            floods.append(httpx.get(f"{serve.url}/flood", headers=host, timeout=600))

        threads = [threading.Thread(target=flood, args=(n,)) for n in ("hog", "hog2")]
        for thread in threads:
            thread.start()

        def probe() -> tuple[int, str]:
            reply = serve.worker("attacker", "probe")
            return reply.status_code, reply.text

        def rest() -> tuple[int, str]:
            reply = httpx.post(
                f"{serve.url}/client/v4/accounts/{attacker}/ai/run/{MODEL}",
                json={"prompt": "hi", "max_tokens": 4},
                headers={"authorization": f"Bearer {attacker_token}"},
                timeout=60,
            )
            return reply.status_code, reply.text

        # The cap counts the account's workers and its REST calls together.
        from_worker = _until_refused(probe)
        assert from_worker.startswith("3036: Account limited: account ")
        assert "AI requests in flight for " + MODEL in from_worker
        assert "at most 3 per account, 2 of them waiting: " in from_worker
        assert "ai.pool.account_share 0.5 of 4 queued, plus all 1 running" in from_worker
        (error,) = json.loads(_until_refused(rest))["errors"]
        assert error["code"] == 3036 and "at most 3 per account" in error["message"]

        # The victim's calls queue in the places left and go before the attacker's queued ones.
        answers = [serve.worker("victim", "ask") for _ in range(3)]
        assert [(a.status_code, a.text) for a in answers] == [(200, "ok")] * 3

        assert serve.worker("attacker", "hog", "/stop").text == "stopping"
        for thread in threads:
            thread.join(600)
        loops = [loop for reply in floods for loop in json.loads(reply.text)]
        assert len(loops) == 4 and sum(loop["ok"] for loop in loops) > 0
        refused = {text for loop in loops for text in loop["refused"]}
        assert refused and all("3036: Account limited" in text for text in refused), refused
    finally:
        serve.stop()


def test_an_account_runs_on_its_share_of_the_slots_and_the_rest_stay_free(
    tmp_path: Path,
) -> None:
    """300 slow streams of one account held all 128 slots of a model; another account's call
    then waited 107 s. Here the model runs 2 and queues 2: the flooding account runs on one
    slot (platform.accounts.ai_running_share 0.5), waits in one place, and is refused past
    that, while the other slot answers the victim."""
    config = CONFIG.replace("max_running_requests: 1", "max_running_requests: 2").replace(
        "max_queued_requests: 4", "max_queued_requests: 2"
    )
    serve = ServeProcess(tmp_path / "state", config)
    floods: list[httpx.Response] = []
    try:
        victim, victim_token = permanent_account(serve, "victim")
        attacker, attacker_token = permanent_account(serve, "attacker")
        ai = {"name": "AI", "type": "ai"}
        with serve.api(victim_token) as api:
            assert put_worker(api, victim, "ask", ONCE, bindings=[ai]).status_code == 200
        with serve.api(attacker_token) as api:
            kv = {"name": "KV", "type": "kv_namespace", "namespace_id": _kv(api, attacker)}
            for name in ("hog", "hog2"):
                assert put_worker(api, attacker, name, HOG, bindings=[ai, kv]).status_code == 200
            assert put_worker(api, attacker, "probe", ONCE, bindings=[ai]).status_code == 200
        assert serve.worker("victim", "ask").text == "ok"  # the model is loaded

        def flood(name: str) -> None:
            host = {"host": f"{name}.attacker.localhost"}
            floods.append(httpx.get(f"{serve.url}/flood", headers=host, timeout=600))

        threads = [threading.Thread(target=flood, args=(n,)) for n in ("hog", "hog2")]
        for thread in threads:
            thread.start()

        def probe() -> tuple[int, str]:
            reply = serve.worker("attacker", "probe")
            return reply.status_code, reply.text

        def rest() -> tuple[int, str]:
            reply = httpx.post(
                f"{serve.url}/client/v4/accounts/{attacker}/ai/run/{MODEL}",
                json={"prompt": "hi", "max_tokens": 4},
                headers={"authorization": f"Bearer {attacker_token}"},
                timeout=60,
            )
            return reply.status_code, reply.text

        # Without the share the account ran on both slots ("2 running, 1 waiting").
        from_worker = _until_refused(probe)
        assert "(1 running, 1 waiting; at most 3 per account, 1 of them waiting" in from_worker
        (error,) = json.loads(_until_refused(rest))["errors"]
        assert error["code"] == 3036 and "(1 running, 1 waiting;" in error["message"]
        # The slot the flood may not take answers the victim.
        answers = [serve.worker("victim", "ask") for _ in range(3)]
        assert [(a.status_code, a.text) for a in answers] == [(200, "ok")] * 3

        assert serve.worker("attacker", "hog", "/stop").text == "stopping"
        for thread in threads:
            thread.join(600)
        loops = [loop for reply in floods for loop in json.loads(reply.text)]
        assert len(loops) == 4 and sum(loop["ok"] for loop in loops) > 0
    finally:
        serve.stop()
