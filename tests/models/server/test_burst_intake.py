"""Requests that reach the model server together are all announced before any is submitted."""

from __future__ import annotations

import asyncio
import json

import pytest

from ember.models.server.app import build_app
from tests.models.server.live import LiveServer, post_as_uvicorn


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_requests_started_together_announce_before_any_is_submitted(
    glm: LiveServer, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tasks started in one event-loop iteration (as uvicorn starts those whose bytes arrived
    # together) each announce themselves (AsyncEngine.expect) before any submits, so that the
    # engine's hold sees the whole group; a route that submitted before its first suspension
    # would let the engine prefill the first alone. (Requests whose bytes the loop has not read
    # yet are the engine's barrier's job: test_async_engine.)
    served = glm.state.served
    assert served is not None
    engine = served.engine
    events: list[str] = []
    expect, generate = engine.expect, engine.generate

    def logged_expect(request_id: str) -> None:
        events.append("announce")
        expect(request_id)

    def logged_generate(request_id: str, *args: object, **kwargs: object):  # noqa: ANN202
        events.append("submit")
        return generate(request_id, *args, **kwargs)

    monkeypatch.setattr(engine, "expect", logged_expect)
    monkeypatch.setattr(engine, "generate", logged_generate)
    if path.endswith("chat/completions"):
        body: dict = {"messages": [{"role": "user", "content": "hi"}]}
    else:
        body = {"prompt": "hi"}
    body |= {"model": "glm", "max_tokens": 2}

    app = build_app(glm.state, load=False)
    payload = json.dumps(body).encode()

    async def call() -> int:
        return (await post_as_uvicorn(app, path, payload))[0]["status"]

    async def burst() -> list[int]:
        return list(await asyncio.gather(*(call() for _ in range(5))))

    assert asyncio.run(burst()) == [200] * 5
    assert events == ["announce"] * 5 + ["submit"] * 5
