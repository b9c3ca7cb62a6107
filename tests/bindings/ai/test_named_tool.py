"""A named ``tool_choice`` finishes with ``stop`` on both of the gateway's dialects, whichever
backend answered: OpenAI and vLLM answer ``stop`` for a named function and ``tool_calls`` for
``auto`` / ``required`` (vllm/entrypoints/openai/chat_completion/serving.py: "In OpenAI's API,
when a tool is called, the finish_reason is: "tool_calls" for "auto" or "required" tool calls,
and "stop" for named tool calls."); SGLang answers ``tool_calls`` for a named function too
(serving_chat.py ``_process_tool_calls``: ``is_required`` covers a ``ToolChoice``), so its
replicas' answers are said the OpenAI way. Workers AI's reference is silent (finish_reason may be
``stop|length|tool_calls|...``), so its dialect says the same as OpenAI's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ember.bindings.ai.dialects import upstream_request
from ember.bindings.ai.gateway import AIGateway, GatewayConfig
from ember.bindings.ai.named_tool import named_tool_chunk, named_tool_result
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.quota import QuotaLimits
from ember.bindings.ai.tenant import Tenant
from ember.models.api.sse import parse_sse
from ember.models.pool.config import parse_pool_config
from tests.bindings.ai.dev_support import DevServer, serve_ai_project
from tests.bindings.ai.support import GLM

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
NAMED = {"type": "function", "function": {"name": "get_weather"}}
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]


def test_the_upstream_request_knows_a_named_function() -> None:
    def named(choice: object) -> bool:
        inputs = {"messages": MESSAGES, "tools": [TOOL], "tool_choice": choice}
        return upstream_request(GLM, inputs, "openai", stream=False).named_tool

    assert named(NAMED)
    assert not named("required") and not named("auto")
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [NAMED]}}
    assert not named(allowed)  # OpenAI's allowed_tools is "required" narrowed, not a named call


def _sglang_chunk(finish: str | None, spaced: bool, rng: random.Random) -> str:
    delta = {"tool_calls": [{"index": 0, "function": {"arguments": '"tool_calls"'}}]}
    if finish is not None or rng.random() < 0.5:
        delta = {}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    payload = {"id": "x", "object": "chat.completion.chunk", "choices": [choice], "usage": None}
    return json.dumps(payload) if spaced else json.dumps(payload, separators=(",", ":"))


@pytest.mark.parametrize("seed", range(20))
def test_chunks_say_stop_for_tool_calls_and_pass_everything_else_through(seed: int) -> None:
    rng = random.Random(seed)
    for finish in (None, "stop", "length", "tool_calls"):
        data = _sglang_chunk(finish, rng.random() < 0.5, rng)
        out = named_tool_chunk(data)
        if finish != "tool_calls":
            assert out is data  # untouched, not re-encoded
            continue
        expected = json.loads(data)
        expected["choices"][0]["finish_reason"] = "stop"
        assert json.loads(out) == expected
    assert named_tool_chunk("[DONE]") == "[DONE]"


def test_a_whole_answer_says_stop_for_tool_calls() -> None:
    body = {"choices": [{"index": 0, "message": {}, "finish_reason": "tool_calls"}]}
    assert named_tool_result(body)["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
    cut = {"choices": [{"index": 0, "message": {}, "finish_reason": "length"}]}
    assert named_tool_result(cut)["choices"][0]["finish_reason"] == "length"  # type: ignore[index]
    assert named_tool_result("not an answer") == "not an answer"


def _sglang_app() -> Starlette:
    """A protocol-level double of an SGLang replica at the pool's HTTP seam: one call to the
    requested function, finished as SGLang finishes a named or required call (``tool_calls``)."""
    call = {"id": "call_0", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": '{"city": "Paris"}'}

    async def chat(request: Request) -> Response:
        if not (await request.json()).get("stream"):
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            return JSONResponse({"object": "chat.completion", "model": GLM, "choices": [choice]})

        async def events():  # noqa: ANN202
            head = {"object": "chat.completion.chunk", "model": GLM}
            delta = {"tool_calls": [{"index": 0, **call}]}
            for piece, finish in ((delta, None), ({}, "tool_calls")):
                choice = {"index": 0, "delta": piece, "finish_reason": finish}
                yield f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": GLM}]})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


@contextlib.contextmanager
def _sglang_double() -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(_sglang_app(), log_level="error", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_an_sglang_replicas_answer_to_a_named_function_is_said_stop() -> None:
    async def finish(gateway: AIGateway, choice: object, dialect: str, stream: bool) -> str:
        inputs = {"messages": MESSAGES, "tools": [TOOL], "tool_choice": choice, "stream": stream}
        options = parse_run_options(None, GLM)
        if dialect == "openai":
            answer = await gateway.chat(Tenant.alone("t"), {**inputs, "model": GLM}, options)
        else:
            answer = await gateway.run(Tenant.alone("t"), GLM, inputs, options)
        if not stream:
            return answer.json()["choices"][0]["finish_reason"]
        assert answer.stream is not None
        content = b"".join([chunk async for chunk in answer.stream])
        events = [e for e in parse_sse(content) if isinstance(e, dict) and e.get("choices")]
        (reason,) = [
            e["choices"][0]["finish_reason"] for e in events if e["choices"][0]["finish_reason"]
        ]
        return reason

    async def main() -> None:
        with _sglang_double() as url:
            pool = parse_pool_config({GLM: {"url": url}}, {"health_interval_s": 0.05})
            config = GatewayConfig(pool, QuotaLimits(), project_config=False)
            gateway = AIGateway(config, progress=lambda line: None)
            for dialect in ("openai", "workers"):
                for stream in (False, True):
                    assert await finish(gateway, NAMED, dialect, stream) == "stop"
                    assert await finish(gateway, "required", dialect, stream) == "tool_calls"
            await gateway.aclose()

    asyncio.run(main())


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-named-tool")


def _finish_reasons(dev: DevServer, path: str, choice: object, stream: bool) -> list[str]:
    body = {
        "model": GLM,
        "messages": MESSAGES,
        "tools": [TOOL],
        "tool_choice": choice,
        "max_tokens": 120,
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": False},
        "stream": stream,
    }
    reply = httpx.post(f"{dev.url}{path}", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    if not stream:
        answer = reply.json()
        answer = answer.get("result", answer)
        assert answer["choices"][0]["message"]["tool_calls"]
        return [answer["choices"][0]["finish_reason"]]
    events = [e for e in parse_sse(reply.content) if isinstance(e, dict) and e.get("choices")]
    return [e["choices"][0]["finish_reason"] for e in events if e["choices"][0]["finish_reason"]]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", ["/ai/v1/chat/completions", f"/client/v4/accounts/a/ai/run/{GLM}"])
def test_both_dialects_finish_a_named_call_with_stop(
    dev: DevServer, path: str, stream: bool
) -> None:
    assert _finish_reasons(dev, path, NAMED, stream) == ["stop"]
    assert _finish_reasons(dev, path, "required", stream) == ["tool_calls"]
