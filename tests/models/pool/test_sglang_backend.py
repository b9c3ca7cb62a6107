"""The SGLang backend. No GPU and no SGLang here, so: an ``sglang`` replica attached by URL is
served through the same protocol by a real ember model server; a launched one, where SGLang is
not installed, fails with SGLang's own words instead of hanging. Its command line is checked in
``test_launch.py``; ``scripts/gpu-check.sh`` runs a real one where SGLang exists."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator

import pytest

from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.tenant import Tenant
from ember.models.api.sse import parse_sse
from ember.models.pool.config import parse_pool_config
from tests.bindings.ai.support import GLM, tiny_checkpoints
from tests.models.server.live import LiveServer, running_server, server_settings

TOOL = {
    "type": "function",
    "function": {
        "name": "pick",
        "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    with running_server(server_settings(str(glm), served_model_name="glm-4.7-flash-fp8")) as live:
        yield live


def test_an_attached_sglang_replica_serves_through_the_same_protocol(server: LiveServer) -> None:
    config = parse_pool_config(
        {GLM: {"backend": "sglang", "url": server.url, "tp": 8, "kv_cache_dtype": "fp8_e4m3"}}
    )

    async def main() -> None:
        gateway = AIGateway(GatewayConfig(config, project_config=False), progress=lambda line: None)
        (replica,) = gateway.pool.group(GLM).replicas
        assert replica.config.describe() == f"attached {server.url}"
        whole = await gateway.run(
            Tenant.alone(GLM), GLM, {"prompt": "hi", "max_tokens": 3}, RunOptions()
        )
        assert whole.json()["model"] == GLM and whole.json()["usage"]["completion_tokens"] == 3
        # The server calls the model by another name: the pool learned it from /v1/models.
        assert replica.served_name == "glm-4.7-flash-fp8"
        inputs = {
            "messages": [{"role": "user", "content": "pick"}],
            "tools": [TOOL],
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "max_tokens": 100,
            "stream": True,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        answer = await gateway.run(Tenant.alone("t"), GLM, inputs, RunOptions())
        events = parse_sse(b"".join([chunk async for chunk in answer.stream]))
        assert events[-1] == "[DONE]" and "usage" in events[-2]
        calls: dict[int, str] = {}
        for event in events[:-2]:
            for piece in (
                event["choices"][0]["delta"].get("tool_calls", []) if event["choices"] else []
            ):
                calls[piece["index"]] = (
                    calls.get(piece["index"], "") + piece["function"]["arguments"]
                )
        assert calls, events
        assert all(isinstance(json.loads(a).get("n"), int) for a in calls.values()), calls
        await gateway.aclose()

    asyncio.run(main())


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="SGLang is installed")
def test_a_launched_sglang_replica_without_sglang_fails_clearly(tmp_path_factory) -> None:  # noqa: ANN001
    glm, _ = tiny_checkpoints(tmp_path_factory)
    config = parse_pool_config(
        {GLM: {"backend": "sglang", "checkpoint": str(glm)}},
        {"restart_backoff_s": 0.05, "max_restart_backoff_s": 0.1},
    )

    async def main() -> str:
        gateway = AIGateway(GatewayConfig(config, project_config=False), progress=lambda line: None)
        try:
            await gateway.run(Tenant.alone("t"), GLM, {"prompt": "hi"}, RunOptions())
        except AIRequestFailed as exc:
            return exc.failure.message
        finally:
            await gateway.aclose()
        return "no error"

    message = asyncio.run(main())
    assert message.startswith(f"3043: Model {GLM} cannot start: replica 1 exited with code 1 while")
    assert "No module named 'sglang'" in message
