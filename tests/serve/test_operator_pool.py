"""ember serve's model pool as an operator runs it: only configured ids, prompt refusals.

One platform whose operator config names: GLM-4.7-Flash on the shipped checkpoint, Kimi K2.6
on an sglang replica that cannot start here (no sglang), GLM-5.2 attached to a URL nobody
listens on, and Kimi K2.5 attached to a protocol-level replica double held by the test (one
slot, no queue) that serves under another name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ember.models.pool.launch import free_port
from tests.models.pool.gate_server import GateServer, gate_servers
from tests.serve.conftest import BASE_CONFIG, ROOT, ServeProcess, permanent_account

GLM = "@cf/zai-org/glm-4.7-flash"
KIMI_SGLANG = "@cf/moonshotai/kimi-k2.6"
DEAD = "@cf/zai-org/glm-5.2"
HELD = "@cf/moonshotai/kimi-k2.5"
UNCONFIGURED = "@cf/zai-org/glm-5.3"
CHECKPOINTS = ROOT / "ember" / "models" / "checkpoints"


@pytest.fixture(scope="module")
def held() -> Iterator[GateServer]:
    with gate_servers("moonshotai/Kimi-K2.5-elsewhere") as (double,):
        yield double


@pytest.fixture(scope="module")
def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def serve(
    tmp_path_factory: pytest.TempPathFactory, held: GateServer, dead_url: str
) -> Iterator[ServeProcess]:
    config = (
        BASE_CONFIG
        + f"""\
ai:
  models:
    "{GLM}":
      checkpoint: {CHECKPOINTS / "glm4moe-tiny"}
      args: ["--torch-threads", "1", "--kv-cache-bytes", "16MiB"]
    "{KIMI_SGLANG}":
      backend: sglang
      device: "cuda:0"
      checkpoint: {CHECKPOINTS / "kimi-tiny"}
    "{DEAD}":
      replicas: [{{url: "{dead_url}"}}]
    "{HELD}":
      replicas: [{{url: "{held.url}", max_running_requests: 1}}]
      max_queued_requests: 0
  pool: {{start: eager, health_interval_s: 0.1, unhealthy_after: 2, restart_backoff_s: 0.1}}
"""
    )
    process = ServeProcess(tmp_path_factory.mktemp("operator-pool") / "state", config)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def tenant(serve: ServeProcess) -> tuple[str, str]:
    return permanent_account(serve, "tenant")


def _run(
    serve: ServeProcess, tenant: tuple[str, str], model: str, **extra: object
) -> httpx.Response:
    account_id, token = tenant
    return httpx.post(
        f"{serve.url}/client/v4/accounts/{account_id}/ai/run/{model}",
        json={"prompt": "hi", "max_tokens": 2, **extra},
        headers={"authorization": f"Bearer {token}"},
        timeout=120,
    )


def test_a_catalog_id_nobody_configured_is_5007_and_starts_nothing(
    serve: ServeProcess, tenant: tuple[str, str]
) -> None:
    reply = _run(serve, tenant, UNCONFIGURED)
    assert reply.status_code == 400, reply.text
    message = reply.json()["errors"][0]["message"]
    assert reply.json()["errors"][0]["code"] == 5007, message
    assert message.startswith(f"No such model {UNCONFIGURED} or task"), message
    assert GLM in message and HELD in message, message  # what is served here instead
    assert f"{UNCONFIGURED} replica" not in serve.output()


def test_an_attached_url_nobody_answers_fails_at_once_and_is_logged(
    serve: ServeProcess, tenant: tuple[str, str], dead_url: str
) -> None:
    # The pool's queue_timeout_s is 600 s: an answer at all means it did not wait for it.
    reply = _run(serve, tenant, DEAD)
    assert reply.status_code == 503, reply.text
    error = reply.json()["errors"][0]
    assert error["code"] == 3040 and "unreachable" in error["message"], error
    lines = [line for line in serve.output().splitlines() if f"{DEAD} replica 1" in line]
    assert any(dead_url in line and "unreachable" in line for line in lines), lines


def test_a_replica_that_cannot_start_tells_the_tenant_little_and_the_operator_all(
    serve: ServeProcess, tenant: tuple[str, str]
) -> None:
    reply = _run(serve, tenant, KIMI_SGLANG)
    assert reply.status_code == 500, reply.text
    error = reply.json()["errors"][0]
    assert error["code"] == 3043, error
    message = error["message"]
    assert message.startswith(f"Model {KIMI_SGLANG} cannot start: replica 1 "), message
    for detail in ("python", ".yaml", "sglang", "/"):
        assert detail not in message.removeprefix(f"Model {KIMI_SGLANG}"), message
    log = serve.output()
    assert f"{KIMI_SGLANG} replica 1 failed to start" in log
    assert "No module named" in log and "sglang" in log


def test_busy_and_a_full_queue_answer_429_with_retry_after(
    serve: ServeProcess, tenant: tuple[str, str], held: GateServer
) -> None:
    with ThreadPoolExecutor(1) as executor:
        first = executor.submit(_run, serve, tenant, HELD)
        deadline = time.monotonic() + 60
        while held.held < 1:  # the replica holds it: its one slot is taken
            assert time.monotonic() < deadline and not first.done(), "the first request never ran"
            time.sleep(0.02)
        busy = _run(serve, tenant, HELD, options={"rejectIfBusy": True})
        full = _run(serve, tenant, HELD)
        held.open()
        assert first.result().status_code == 200
    for reply in (busy, full):
        assert reply.status_code == 429, reply.text
        assert reply.json()["errors"][0]["code"] == 3040
        assert int(reply.headers["retry-after"]) >= 1, reply.headers


def test_an_attached_server_serving_another_name_is_a_warning(
    serve: ServeProcess, tenant: tuple[str, str], held: GateServer
) -> None:
    held.open()
    assert _run(serve, tenant, HELD).status_code == 200
    name = "moonshotai/Kimi-K2.5-elsewhere"
    lines = [line for line in serve.output().splitlines() if name in line]
    assert any(HELD in line and "warning" in line for line in lines), serve.output()[-3000:]


def test_health_answers_with_the_pools_view(serve: ServeProcess) -> None:
    def models() -> dict[str, dict]:
        reply = httpx.get(serve.url + "/health", timeout=30)
        assert reply.status_code == 200, reply.text
        assert reply.json()["status"] == "ok"
        return {model["id"]: model for model in reply.json()["models"]}

    deadline = time.monotonic() + 120
    seen = models()
    # The replicas started with the platform (start: eager); the broken ones end up so.
    while (
        seen[KIMI_SGLANG]["replicas"][0]["state"] != "failed"
        or seen[DEAD]["replicas"][0]["state"] != "dead"
    ):
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)
        seen = models()
    assert set(seen) == {GLM, KIMI_SGLANG, DEAD, HELD}  # the configured ids, nothing else
    assert {"state", "outstanding", "restarts"} <= set(seen[GLM]["replicas"][0])
    assert "queued" in seen[GLM] and "url" not in seen[DEAD]["replicas"][0]  # no addresses


def test_a_tenants_model_list_shows_no_replica_address(
    serve: ServeProcess, tenant: tuple[str, str], held: GateServer, dead_url: str
) -> None:
    """As ``/health``: an attached replica is "attached" to a tenant, never its URL (the
    operator's network), on ``/ai/v1/models`` and ``ai/models/search`` alike."""
    account_id, token = tenant
    bearer = {"authorization": f"Bearer {token}"}
    listed = httpx.get(serve.url + "/ai/v1/models", headers=bearer, timeout=60)
    search = httpx.get(
        f"{serve.url}/client/v4/accounts/{account_id}/ai/models/search", headers=bearer, timeout=60
    )
    for reply in (listed, search):
        assert reply.status_code == 200, reply.text
        assert held.url not in reply.text and dead_url not in reply.text, reply.text
    cards = {card["id"]: card for card in listed.json()["data"]}
    assert [r["describe"] for r in cards[HELD]["replicas"]] == ["attached"]
