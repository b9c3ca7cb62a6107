"""The REST and OpenAI-compatible AI routes stop a request whose client went away.

A replica double holds every request until the test opens its gate, so a request is in flight
for as long as the test likes; the client gives up (a read timeout closes its connection) and
the request must leave the pool (its slot free for others), as it does through ``env.AI.run``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from ember.bindings.ai.gateway import AIGateway, GatewayConfig
from ember.bindings.ai.rest import ai_app
from ember.models.pool.config import parse_pool_config
from tests.bindings.ai.support import GLM, wait_until
from tests.models.pool.gate_server import GateServer, gate_servers


class RestServer:
    """``ai_app`` over one gateway (made in the server's loop), on a 127.0.0.1 port."""

    def __init__(self, replica_url: str) -> None:
        self.replica_url = replica_url
        self.gateway: AIGateway | None = None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(ai_app(self._gateway), log_level="error", lifespan="off", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def _gateway(self) -> AIGateway:
        if self.gateway is None:
            pool = parse_pool_config({GLM: {"url": self.replica_url}}, {"health_interval_s": 0.05})
            config = GatewayConfig(pool, project_config=False)
            self.gateway = AIGateway(config, progress=lambda line: None)
        return self.gateway

    def outstanding(self) -> int:
        """Requests the pool has sent to the replica and not yet seen finish."""
        if self.gateway is None:
            return 0
        rows = {row.model_id: row for row in self.gateway.pool.status()}
        return sum(r.outstanding for r in rows[GLM].replicas)


@pytest.fixture
def rest() -> Iterator[tuple[RestServer, GateServer]]:
    with gate_servers(GLM) as (double,):
        server = RestServer(double.url)
        server.thread.start()
        wait_until(lambda: server.server.started, "the REST server", 10)
        try:
            yield server, double
        finally:
            double.open()
            server.server.should_exit = True
            server.thread.join(10)
            server.sock.close()


CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/client/v4/accounts/acct/ai/run/{GLM}", CHAT),
        ("/ai/v1/chat/completions", {**CHAT, "model": GLM}),
        (f"/client/v4/accounts/acct/ai/run/{GLM}", {**CHAT, "stream": True}),
    ],
    ids=["rest", "openai", "rest-stream"],
)
def test_a_request_whose_client_left_leaves_the_pool(
    rest: tuple[RestServer, GateServer], path: str, body: dict[str, Any]
) -> None:
    server, double = rest
    with pytest.raises(httpx.ReadTimeout):
        # The double holds the request: the client times out and closes its connection.
        httpx.post(server.url + path, json=body, timeout=httpx.Timeout(10, read=1.0))
    assert double.seen, "the request reached the replica"
    wait_until(lambda: server.outstanding() == 0, "the abandoned request to leave the pool", 30)
    # The replica's slot is free for the next caller, which is answered once the gate opens.
    double.open()
    reply = httpx.post(server.url + path, json={**body, "stream": False}, timeout=30)
    assert reply.status_code == 200, reply.text
