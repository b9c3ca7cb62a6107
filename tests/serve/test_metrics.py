"""``ember serve --metrics-port``: Prometheus metrics on a listener of their own, counting
workers' requests, AI calls by model, status and code, and the pool as it stands."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from ember.models.server.metrics import parse_prometheus
from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

GLM = "@cf/zai-org/glm-4.7-flash"
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    result = await env.AI.run("{GLM}", {{"prompt": "hi", "max_tokens": 2}})
    return Response.json(result)
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    state = tmp_path_factory.mktemp("metrics") / "state"
    process = ServeProcess(state, tiny_ai_config(GLM), "--metrics-port", "0")
    yield process
    process.stop()


def metrics_url(serve: ServeProcess) -> str:
    found = re.search(r"Metrics on (http://\S+/metrics)", serve.output())
    assert found, serve.output()
    return found.group(1)


def test_metrics_count_workers_ai_calls_and_the_pool(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "metered")
    with serve.api(token) as api:
        bindings = [{"name": "AI", "type": "ai"}]
        assert put_worker(api, account_id, "asker", WORKER, bindings=bindings).status_code == 200
        unknown = api.post(f"/accounts/{account_id}/ai/run/@cf/nobody/nothing", json={})
        assert unknown.status_code == 400, unknown.text
    answered = serve.worker("metered", "asker", "/")
    assert answered.status_code == 200, answered.text

    scraped = httpx.get(metrics_url(serve), timeout=30)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_prometheus(scraped.text)
    assert samples['ember_worker_requests_total{status="2xx",outcome="ok"}'] >= 1
    assert samples[f'ember_ai_requests_total{{model="{GLM}",status="200",code="0"}}'] == 1
    assert samples['ember_ai_requests_total{model="(unknown)",status="400",code="5007"}'] == 1
    assert samples[f'ember_ai_answer_head_seconds_count{{model="{GLM}"}}'] == 1
    timed = [key for key in samples if key.startswith("ember_ai_answer_head")]
    assert not [key for key in timed if "(unknown)" in key], timed  # refusals are not timed
    assert samples["ember_isolates"] >= 1 and samples["ember_deployments_live"] >= 1
    assert samples[f'ember_pool_replicas{{model="{GLM}",state="ready"}}'] == 1
    assert samples[f'ember_pool_queued_requests{{model="{GLM}"}}'] == 0
    assert (
        samples[f'ember_pool_replica_requests_in_flight{{model="{GLM}",replica="1"}}'] == 0
    )  # numbered as the log names it
    assert "# TYPE ember_ai_answer_head_seconds histogram" in scraped.text


def test_the_metrics_listener_serves_metrics_only_and_the_tenants_port_none(
    serve: ServeProcess,
) -> None:
    url = metrics_url(serve)
    other = httpx.get(url.replace("/metrics", "/client/v4/user/tokens/verify"), timeout=30)
    assert other.status_code == 404 and "GET /metrics only" in other.text
    tenants = httpx.get(serve.url + "/metrics", timeout=30)
    assert "ember_worker_requests_total" not in tenants.text
