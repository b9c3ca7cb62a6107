"""The REST and OpenAI-compatible AI routes stop a request whose client went away.

A replica double holds every request until the test opens its gate, so a request is in flight
for as long as the test likes; the client gives up (a read timeout closes its connection) and
the request must leave the pool (its slot free for others), as it does through ``env.AI.run``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ember.bindings.ai.gateway import AIGateway, GatewayConfig
from ember.models.pool.config import parse_pool_config
from tests.bindings.ai.support import GLM, RestServer, wait_until
from tests.models.pool.gate_server import GateServer, gate_servers


@pytest.fixture
def rest() -> Iterator[tuple[RestServer, GateServer]]:
    with gate_servers(GLM) as (double,):
        pool = parse_pool_config({GLM: {"url": double.url}}, {"health_interval_s": 0.05})
        config = GatewayConfig(pool, project_config=False)
        with RestServer(lambda: AIGateway(config, progress=lambda line: None)) as server:
            try:
                yield server, double
            finally:
                double.open()


def _outstanding(server: RestServer) -> int:
    """Requests the pool has sent to the replica and not yet seen finish."""
    if server.gateway is None:
        return 0
    rows = {row.model_id: row for row in server.gateway.pool.status()}
    return sum(r.outstanding for r in rows[GLM].replicas)


CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
RESPONSES = {"model": GLM, "input": "hi", "max_output_tokens": 4}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/client/v4/accounts/acct/ai/run/{GLM}", CHAT),
        ("/ai/v1/chat/completions", {**CHAT, "model": GLM}),
        (f"/client/v4/accounts/acct/ai/run/{GLM}", {**CHAT, "stream": True}),
        ("/ai/v1/responses", RESPONSES),
        ("/ai/v1/responses", {**RESPONSES, "stream": True}),
    ],
    ids=["rest", "openai", "rest-stream", "responses", "responses-stream"],
)
def test_a_request_whose_client_left_leaves_the_pool(
    rest: tuple[RestServer, GateServer], path: str, body: dict[str, Any]
) -> None:
    server, double = rest
    with pytest.raises(httpx.ReadTimeout):
        # The double holds the request: the client times out and closes its connection.
        httpx.post(server.url + path, json=body, timeout=httpx.Timeout(10, read=1.0))
    assert double.seen, "the request reached the replica"
    wait_until(lambda: _outstanding(server) == 0, "the abandoned request to leave the pool", 30)
    # The replica's slot is free for the next caller, which is answered once the gate opens.
    double.open()
    reply = httpx.post(server.url + path, json={**body, "stream": False}, timeout=30)
    assert reply.status_code == 200, reply.text


@pytest.fixture
def one_slot() -> Iterator[tuple[RestServer, GateServer]]:
    with gate_servers(GLM) as (double,):
        replica = {"url": double.url, "max_running_requests": 1}
        pool = parse_pool_config({GLM: {"replicas": [replica]}}, {"health_interval_s": 0.05})
        config = GatewayConfig(pool, project_config=False)
        with RestServer(lambda: AIGateway(config, progress=lambda line: None)) as server:
            try:
                yield server, double
            finally:
                double.open()


def test_responses_busy_is_the_chat_routes_429(one_slot: tuple[RestServer, GateServer]) -> None:
    server, double = one_slot
    held = {**RESPONSES, "stream": True}
    with httpx.stream("POST", server.url + "/ai/v1/responses", json=held, timeout=30) as stream:
        lines = stream.iter_lines()  # kept open: the stream holds the one slot
        assert next(lines) == "event: response.created"
        wait_until(lambda: double.held == 1, "the replica to hold a request", 10)
        busy = {"options": {"rejectIfBusy": True}}
        chat = httpx.post(
            server.url + "/ai/v1/chat/completions", json={**CHAT, "model": GLM, **busy}
        )
        responses = httpx.post(server.url + "/ai/v1/responses", json={**RESPONSES, **busy})
    assert responses.status_code == chat.status_code == 429
    assert responses.json() == chat.json()
