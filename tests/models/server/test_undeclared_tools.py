"""A tool call to a function the request never declared is dropped, never returned.

The shipped tiny checkpoints were trained on tool turns whose tools included ``list_functions``;
asked "Weather in Lisbon?" with only ``get_weather`` declared, both emit a call to
``list_functions`` under greedy decoding. Returned, it would crash the usual tool loop
(``TOOLS[name](**args)``). As SGLang does ("Model attempted to call undefined function"), the
call is dropped, text and all; with no call left the finish reason is ``stop``, and the server
logs the drop. With ``tool_choice`` required or named, the grammar allows declared names only.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.models.server.live import LiveServer, running_server, server_settings

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ASK = [{"role": "user", "content": "Weather in Lisbon?"}]


@pytest.fixture(scope="module", params=["glm", "kimi"])
def served(
    request: pytest.FixtureRequest, glm_dir: Path, kimi_dir: Path
) -> Iterator[tuple[LiveServer, io.StringIO]]:
    directory = glm_dir if request.param == "glm" else kimi_dir
    log = io.StringIO()
    with running_server(server_settings(str(directory), served_model_name="m"), log=log) as live:
        yield live, log


def _client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)


def test_undeclared_call_is_dropped_and_logged(served: tuple[LiveServer, io.StringIO]) -> None:
    live, log = served
    answer = _client(live).chat.completions.create(
        model="m",
        messages=ASK,
        tools=TOOLS,
        max_tokens=80,
        temperature=0,  # type: ignore[arg-type]
    )
    choice = answer.choices[0]
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert "list_functions" not in (choice.message.content or "")
    assert "undefined function 'list_functions'" in log.getvalue()


def test_undeclared_call_is_dropped_from_a_stream(served: tuple[LiveServer, io.StringIO]) -> None:
    live, _ = served
    stream = _client(live).chat.completions.create(
        model="m",
        messages=ASK,
        tools=TOOLS,  # type: ignore[arg-type]
        max_tokens=80,
        temperature=0,
        stream=True,
    )
    calls, finishes, content = [], [], []
    for chunk in stream:
        for choice in chunk.choices:
            calls.extend(choice.delta.tool_calls or [])
            content.append(choice.delta.content or "")
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
    assert calls == []
    assert finishes == ["stop"]
    assert "list_functions" not in "".join(content)


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_forced_calls_only_name_declared_tools(
    served: tuple[LiveServer, io.StringIO], tool_choice: object
) -> None:
    live, _ = served
    seen: list[str] = []
    for seed in range(4):  # sampled: a reasoning block may use up max_tokens, never a name
        answer = _client(live).chat.completions.create(
            model="m",
            messages=ASK,
            tools=TOOLS,  # type: ignore[arg-type]
            tool_choice=tool_choice,  # type: ignore[arg-type]
            max_tokens=120,
            temperature=1.0,
            seed=seed,
        )
        seen += [call.function.name for call in answer.choices[0].message.tool_calls or []]
    assert seen and set(seen) == {"get_weather"}
