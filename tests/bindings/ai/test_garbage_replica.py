"""A replica answering 200 with a body that is not JSON: a 3040 naming it, in every dialect.

Before, REST said ``{"result": "{not json at all", "success": true}``, ``/ai/v1`` returned a JSON
string, and a stream's ``data: {garbage`` event was dropped so the client got 200 and only
``[DONE]``. The replica is attached by URL and speaks raw HTTP (``sick_server.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from ember.bindings.ai.gateway import AIGateway, GatewayConfig
from ember.models.pool.config import parse_pool_config
from tests.bindings.ai.support import GLM, RestServer
from tests.models.pool.sick_server import sick_server

MESSAGES = [{"role": "user", "content": "hi"}]
NAMED = "replica 1 answered invalid JSON"


@pytest.fixture(scope="module")
def rest() -> Iterator[RestServer]:
    with sick_server("garbage") as sick:
        pool = parse_pool_config({GLM: {"url": sick.url}}, {"eject_after": 0})
        config = GatewayConfig(pool, project_config=False)
        with RestServer(lambda: AIGateway(config, progress=lambda line: None)) as server:
            yield server


def test_rest_answers_3040_naming_the_replica(rest: RestServer) -> None:
    url = f"{rest.url}/client/v4/accounts/a/ai/run/{GLM}"
    response = httpx.post(url, json={"messages": MESSAGES}, timeout=60)
    assert response.status_code == 503, response.text
    (error,) = response.json()["errors"]
    assert error["code"] == 3040 and NAMED in error["message"], error


def test_openai_route_answers_an_error_naming_the_replica(rest: RestServer) -> None:
    body = {"model": GLM, "messages": MESSAGES}
    response = httpx.post(f"{rest.url}/ai/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 503, response.text
    assert NAMED in response.json()["error"]["message"], response.text


@pytest.mark.parametrize("route", ["rest", "openai"])
def test_a_stream_ends_with_the_error_event(rest: RestServer, route: str) -> None:
    if route == "rest":
        url = f"{rest.url}/client/v4/accounts/a/ai/run/{GLM}"
        body: dict = {"messages": MESSAGES, "stream": True}
    else:
        url = f"{rest.url}/ai/v1/chat/completions"
        body = {"model": GLM, "messages": MESSAGES, "stream": True}
    response = httpx.post(url, json=body, timeout=60)
    text = response.text
    assert NAMED in text and "3040" in text, text


def test_a_stream_event_broken_inside_ends_the_stream_with_the_error_event() -> None:
    # {"choices":[],"usage":{"prompt_tokens": }} looks like an object: the Workers dialect
    # parses it (its usage becomes the final event) and used to drop it, ending the stream as
    # if complete. The chunk before it still reaches the caller.
    with sick_server("broken") as sick:
        pool = parse_pool_config({GLM: {"url": sick.url}}, {"eject_after": 0})
        config = GatewayConfig(pool, project_config=False)
        with RestServer(lambda: AIGateway(config, progress=lambda line: None)) as server:
            url = f"{server.url}/client/v4/accounts/a/ai/run/{GLM}"
            body = {"messages": MESSAGES, "stream": True}
            response = httpx.post(url, json=body, timeout=60)
    events = [line for line in response.text.splitlines() if line.startswith("data: ")]
    assert '"content":"fine"' in events[0].replace(" ", ""), events
    assert events[-1] == "data: [DONE]", events
    (error,) = json.loads(events[-2].removeprefix("data: "))["errors"]
    assert error["code"] == 3040 and NAMED in error["message"], error
    assert '{"choices":[],"usage":{"prompt_tokens": }}' in error["message"].replace('\\"', '"'), (
        error
    )
