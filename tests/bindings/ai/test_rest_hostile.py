"""The defects the REST fuzz test (test_rest_fuzz) found, each with the exact body: Workers
AI's 5006 envelope saying what was wrong, never a 500."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from ember.bindings.ai.gateway import AIGateway, GatewayConfig
from ember.bindings.ai.service import _inputs
from ember.errors import InvalidModelInput
from ember.models.pool.config import parse_pool_config
from tests.bindings.ai.support import GLM, RestServer

DEEP = b'{"prompt": "x", "max_tokens": ' + b"[" * 100000 + b"]" * 100000 + b"}"


@pytest.fixture(scope="module")
def rest() -> Iterator[RestServer]:
    # Nothing listens on the replica's port: these bodies must be refused before any model.
    pool = parse_pool_config({GLM: {"url": "http://127.0.0.1:9"}}, {})
    config = GatewayConfig(pool, project_config=False)
    with RestServer(lambda: AIGateway(config, progress=lambda line: None)) as server:
        yield server


def test_a_body_nested_past_the_parser_is_a_5006(rest: RestServer) -> None:
    # It was a 500 (a RecursionError out of json.loads).
    response = httpx.post(f"{rest.url}/client/v4/accounts/a/ai/run/{GLM}", content=DEEP)
    assert response.status_code == 400, response.text
    error = response.json()["errors"][0]
    assert error["code"] == 5006 and "nested too deeply" in error["message"]


def test_openai_route_body_nested_past_the_parser_is_a_400(rest: RestServer) -> None:
    response = httpx.post(f"{rest.url}/ai/v1/chat/completions", content=DEEP)
    assert response.status_code == 400, response.text
    assert "nested too deeply" in response.json()["error"]["message"]


def test_binding_inputs_nested_past_the_parser_are_a_5006() -> None:
    # env.AI.run's inputs cross from the isolate as JSON text: the same parser, the same fix.
    with pytest.raises(InvalidModelInput, match="nested too deeply"):
        asyncio.run(_inputs(DEEP, None))


def test_openai_route_unknown_model_names_the_model_param(rest: RestServer) -> None:
    # The fuzz test's body had a model id of odd characters; any unknown id did the same: an
    # error whose ``param`` was null, where the model server names ``model``.
    body = {"model": "³Z", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
    response = httpx.post(f"{rest.url}/ai/v1/chat/completions", json=body)
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model", error


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # The gateway re-encoded the body for the replica and failed: a 503 "internal error
        # (UnicodeEncodeError)", code 3040.
        (b'{"text": "\\ud800\\ud800", "prompt": "\\udc00"}', "/text"),
        (b'{"prompt": "a\\udfffb", "max_tokens": 3}', "/prompt"),
        # The replica failed reading it: a 503 "the model server answered 500".
        (
            b'{"prompt": "Hi", "chat_template_kwargs": '
            + b'{"type": "array", "items": ' * 800
            + b"{}"
            + b"}" * 801,
            "/chat_template_kwargs",
        ),
    ],
)
def test_bodies_no_replica_could_read_are_a_5006_naming_the_field(
    rest: RestServer, body: bytes, field: str
) -> None:
    response = httpx.post(f"{rest.url}/client/v4/accounts/a/ai/run/{GLM}", content=body)
    assert response.status_code == 400, response.text
    error = response.json()["errors"][0]
    assert error["code"] == 5006 and f"at '{field}'" in error["message"], error
