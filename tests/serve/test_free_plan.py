"""What one temporary account (anyone, no login) may take of what every account shares on a real
``ember serve``: KV operations per UTC day and Workers AI neurons per UTC day (Cloudflare's Free
plan numbers by default), and the disk all temporary accounts together may fill
(``platform.temporary.max_total_stored_bytes``). Each refusal speaks as the platform does.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ember.bindings.ai.neurons import neurons_of
from tests.serve.conftest import TINY_GLM, ServeProcess, put_worker, temporary_account

MODEL = "@cf/zai-org/glm-4.7-flash"
CONFIG = f"""\
platform:
  proof_of_work: {{k: 64, g: 64, sample: 8}}
  temporary:
    kv_writes_per_day: 3
    kv_reads_per_day: 50
    ai_neurons_per_day: 1
    max_total_stored_bytes: 64KiB
ai:
  models:
    "{MODEL}":
      checkpoint: {TINY_GLM}
      args: ["--torch-threads", "1", "--kv-cache-bytes", "16MiB"]
"""
NEURONS_SPENT = (
    "3036: You have used up your daily free allocation of 1 neurons. Please upgrade to "
    "Cloudflare's Workers Paid plan if you would like to continue usage."
)
ASK = {"prompt": "hi", "max_tokens": 8, "ignore_eos": True}
KV_WORKER = """\
from workers import Response

async def on_fetch(request, env):
    said = []
    for index in range(int(request.url.rsplit("/", 1)[1])):
        try:
            await env.KV.put(f"k{index}", "v")
            said.append("stored")
        except Exception as exc:
            said.append(str(exc))
    return Response("|".join(said))
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("free-plan") / "state", CONFIG)
    yield process
    process.stop()


def test_kv_writes_per_day_of_a_temporary_account(serve: ServeProcess) -> None:
    account = temporary_account(serve)["account"]
    account_id, name = account["id"], account["name"]  # type: ignore[index]
    with serve.api(account["apiToken"]) as api:  # type: ignore[index]
        made = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"})
        namespace = made.json()["result"]["id"]
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        assert api.put(f"{values}/rest", content=b"1").status_code == 200
        binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "writer", KV_WORKER, bindings=binding).status_code == 200
        # The REST write and the worker's share the account's three writes a day.
        said = serve.worker(name, "writer", "/put/4").text.split("|")
        assert said == ["stored", "stored"] + ["KV put() limit exceeded for the day."] * 2
        refused = api.put(f"{values}/late", content=b"2")
        assert refused.status_code == 429
        assert refused.json()["errors"][0]["code"] == 10048
        # Reads are their own allowance: the stored keys are still there to read.
        assert api.get(f"{values}/k1").content == b"v"


AI_WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.AI.run("{MODEL}", {{"prompt": "hi", "max_tokens": 2}})
    except Exception as exc:
        return Response(str(exc), status=429)
    return Response("answered")
"""


def _spend_until_refused(ask: object) -> list[int]:
    """Statuses of calls made until one is refused (at most 40)."""
    statuses: list[int] = []
    while len(statuses) < 40 and 429 not in statuses:
        statuses.append(ask())  # type: ignore[operator]
    return statuses


def test_ai_neurons_per_day_of_a_temporary_account(serve: ServeProcess) -> None:
    account = temporary_account(serve)["account"]
    account_id, name = account["id"], account["name"]  # type: ignore[index]
    with serve.api(account["apiToken"]) as api:  # type: ignore[index]
        bindings = [{"name": "AI", "type": "ai"}]
        assert put_worker(api, account_id, "asker", AI_WORKER, bindings=bindings).status_code == 200
        run = f"/accounts/{account_id}/ai/run/{MODEL}"
        answers: list[dict[str, object]] = []

        def ask() -> int:
            reply = api.post(run, json=ASK, timeout=300)
            if reply.status_code == 200:
                answers.append(reply.json()["result"]["usage"])
            else:
                assert reply.json()["errors"][0]["code"] == 3036, reply.text
                assert "3036: " + reply.json()["errors"][0]["message"] == NEURONS_SPENT
                assert 0 < int(reply.headers["retry-after"]) <= 86_400
            return reply.status_code

        statuses = _spend_until_refused(ask)
        # Each answer costs about 0.3 neuron (8 output tokens): the allowance of 1 lets a few
        # through, checked before each one, then refuses.
        assert statuses[-1] == 429 and set(statuses[:-1]) == {200}, statuses
        costs = [
            neurons_of(MODEL, int(u["prompt_tokens"]), int(u["completion_tokens"]))  # type: ignore[call-overload]
            for u in answers
        ]
        assert sum(costs) >= 1 > sum(costs[:-1]), costs  # refused once the allowance was spent
        # The account's workers share the allowance: spent.
        refused = serve.worker(name, "asker")
        assert refused.status_code == 429 and refused.text == NEURONS_SPENT, refused.text


def test_an_openai_stream_without_usage_is_counted_all_the_same(serve: ServeProcess) -> None:
    account = temporary_account(serve)["account"]
    account_id = account["id"]  # type: ignore[index]
    with serve.api(account["apiToken"]) as api:  # type: ignore[index]
        chat = f"/accounts/{account_id}/ai/v1/chat/completions"
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 8,
            "ignore_eos": True,
            "stream": True,
        }

        def ask() -> int:
            reply = api.post(chat, json=body, timeout=300)
            if reply.status_code == 200:
                # The caller did not ask for usage: it gets none, as from OpenAI.
                assert '"usage":{' not in reply.text and '"usage": {' not in reply.text
                assert reply.text.rstrip().endswith("data: [DONE]"), reply.text
            else:
                assert reply.json()["error"]["code"] == 3036, reply.text
            return reply.status_code

        statuses = _spend_until_refused(ask)
        assert statuses[-1] == 429 and 0 < len(statuses) - 1 < 10, statuses


BIG_KV_WORKER = """\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.KV.put("big", "v" * 30 * 1024)
    except Exception as exc:
        return Response(str(exc), status=507)
    return Response("stored")
"""
KEY = "platform.temporary.max_total_stored_bytes"


def test_what_all_temporary_accounts_store_together_is_capped(serve: ServeProcess) -> None:
    assert (
        "temporary accounts: at most 65,536 bytes stored by all of them together" in serve.output()
    )
    first, second = temporary_account(serve)["account"], temporary_account(serve)["account"]
    with serve.api(first["apiToken"]) as api:  # type: ignore[index]
        account_id = first["id"]  # type: ignore[index]
        made = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"})
        binding = [
            {"name": "KV", "type": "kv_namespace", "namespace_id": made.json()["result"]["id"]}
        ]
        source = BIG_KV_WORKER + "#" + "x" * 40 * 1024 + "\n"
        assert put_worker(api, account_id, "big", source, bindings=binding).status_code == 200
    # The worker's env.KV: 30 KiB more would take temporary accounts past 64 KiB.
    refused = serve.worker(first["name"], "big")  # type: ignore[index]
    assert refused.status_code == 507, refused.text
    assert refused.text.startswith("KV PUT failed: 413 temporary accounts on this platform")
    assert KEY in refused.text and "claim the account" in refused.text
    # Another temporary account's upload: the same cap, the same words.
    with serve.api(second["apiToken"]) as api:  # type: ignore[index]
        upload = put_worker(api, second["id"], "w", "#" + "x" * 30 * 1024 + "\n" + AI_WORKER)  # type: ignore[index]
    assert upload.status_code == 403, upload.text
    assert KEY in upload.json()["errors"][0]["message"]
