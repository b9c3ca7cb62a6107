"""Requests that reach the model server together are all announced before any is submitted
(OpenAI routes and SGLang's ``/generate``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ember.models.server.app import build_app
from tests.models.server.live import LiveServer, post_as_uvicorn


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/generate"])
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
    expect, forget, generate = engine.expect, engine.forget, engine.generate
    announced: set[str] = set()

    def logged_expect(request_id: str) -> None:
        events.append("announce")
        announced.add(request_id)
        expect(request_id)

    def logged_forget(request_id: str) -> None:
        # /generate announces under a placeholder first: it must pass the announcement on to
        # the request's own id before dropping the placeholder.
        announced.discard(request_id)
        assert announced, "a request dropped its announcement before it was submitted"
        forget(request_id)

    def logged_generate(request_id: str, *args: object, **kwargs: object):  # noqa: ANN202
        events.append("submit")
        assert request_id in announced, "submitted under an id that was never announced"
        return generate(request_id, *args, **kwargs)

    monkeypatch.setattr(engine, "expect", logged_expect)
    monkeypatch.setattr(engine, "forget", logged_forget)
    monkeypatch.setattr(engine, "generate", logged_generate)
    if path == "/generate":
        body: dict = {"text": "hi", "sampling_params": {"max_new_tokens": 2}}
    elif path.endswith("chat/completions"):
        body = {"messages": [{"role": "user", "content": "hi"}], "model": "glm", "max_tokens": 2}
    else:
        body = {"prompt": "hi", "model": "glm", "max_tokens": 2}

    app = build_app(glm.state, load=False)
    payload = json.dumps(body).encode()

    async def call() -> int:
        return (await post_as_uvicorn(app, path, payload))[0]["status"]

    async def burst() -> list[int]:
        return list(await asyncio.gather(*(call() for _ in range(5))))

    assert asyncio.run(burst()) == [200] * 5
    first_submit = events.index("submit")
    assert events.count("submit") == 5 and "announce" not in events[first_submit:]
