"""A forced tool call cut by ``max_tokens`` (finish_reason ``length``) keeps the arguments the
model generated, unclosed, in the message and in the stream alike (vLLM streams them as
parsed); ember used to send GLM's as ``""`` unless a whole key/value pair had arrived."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.models.server.live import LiveServer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city", "days"],
            },
        },
    }
]
BODY = {
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": TOOLS,
    "tool_choice": "required",
    "temperature": 0,
    "chat_template_kwargs": {"enable_thinking": False},
}


def _whole(live: LiveServer, max_tokens: int) -> tuple[str | None, dict]:
    reply = httpx.post(
        live.url + "/v1/chat/completions", json=BODY | {"max_tokens": max_tokens}, timeout=120
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    calls = body["choices"][0]["message"].get("tool_calls")
    return (calls[0]["function"]["arguments"] if calls else None), body


def _streamed(live: LiveServer, max_tokens: int) -> str | None:
    body = BODY | {"max_tokens": max_tokens, "stream": True}
    arguments = None
    with httpx.stream("POST", live.url + "/v1/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:])["choices"]:
                for call in choice["delta"].get("tool_calls") or []:
                    piece = call.get("function", {}).get("arguments") or ""
                    arguments = (arguments or "") + piece
    return arguments


@pytest.mark.parametrize("family", ["glm", "kimi"])
def test_a_cut_call_keeps_its_arguments_as_far_as_generated(
    family: str, request: pytest.FixtureRequest
) -> None:
    live: LiveServer = request.getfixturevalue(family)
    full, body = _whole(live, 80)
    assert full is not None and body["choices"][0]["finish_reason"] == "tool_calls"
    spent = body["usage"]["completion_tokens"]
    # Every cut, whole and streamed, sent at once: the server batches them (8 running), so the
    # ~2 x spent requests take a few batched passes instead of a sum of ever longer sequential
    # ones (kimi 22 -> 6 s). Greedy decoding gives each the same tokens alone or batched.
    with ThreadPoolExecutor(16) as pool:
        cuts = [
            (
                max_tokens,
                pool.submit(_whole, live, max_tokens),
                pool.submit(_streamed, live, max_tokens),
            )
            for max_tokens in range(1, spent)
        ]
        answers = [
            (max_tokens, whole.result(), streamed.result()) for max_tokens, whole, streamed in cuts
        ]
    seen = []
    for max_tokens, (arguments, cut), streamed in answers:
        assert cut["choices"][0]["finish_reason"] == "length"
        assert streamed == arguments, (max_tokens, streamed, arguments)
        if arguments is not None:
            assert full.startswith(arguments), (max_tokens, arguments, full)
            seen.append(arguments)
    # Nearly every token of the call adds to its arguments (markers of a pair included).
    assert seen and len(set(seen)) >= len(seen) // 2, seen
