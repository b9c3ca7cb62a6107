"""Workers AI's classic models (``@cf/meta/llama-3.1-8b-instruct`` and kin) on a real ``ember dev``:
mapped to the tiny GLM checkpoint, they answer as the platform's classic schema does
(``{response, tool_calls, usage}``, ``{"response": ...}`` events) through ``env.AI.run`` and REST
``ai/run``; ``/ai/v1/chat/completions`` stays OpenAI's; an unmapped id's 5007 says how to map it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import jsonschema
import openai
import pytest
import yaml

from ember.models.api.sse import parse_sse
from tests.bindings.ai.dev_support import DevServer, ember_env, run_dev
from tests.bindings.ai.support import HI, SMALL_SERVER, UNIT, tiny_checkpoints

LLAMA = "@cf/meta/llama-3.1-8b-instruct"  # classic by default
LLAMA_CHAT = "@cf/meta/llama-3.2-1b-instruct"  # classic id, configured as chat completions
UNMAPPED = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"
FLAT_TOOL = {"name": "get_weather", "description": "Forecast", "parameters": UNIT}
NAMED = {"type": "function", "function": {"name": "get_weather"}}

WORKER = """
import json
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        ask = await request.json()
        try:
            result = await self.env.AI.run(ask["model"], ask["inputs"])
        except Exception as error:
            return Response.json({"type": type(error).__name__, "message": str(error)}, status=599)
        if ask["inputs"].get("stream"):
            return Response(result, headers={"content-type": "text/event-stream"})
        attr = result.response if "response" in result else None
        return Response.json({"result": result, "attr": attr})
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("classic")
    (root / "worker.py").write_text(WORKER)
    models = {
        LLAMA: {"checkpoint": str(glm), "args": SMALL_SERVER},
        LLAMA_CHAT: {"checkpoint": str(glm), "args": SMALL_SERVER, "schema": "chat-completions"},
    }
    config = {"name": "classic", "main": "worker.py", "ai": {"binding": "AI", "models": models}}
    (root / "ember.yaml").write_text(yaml.safe_dump(config))
    yield from run_dev(root)


def _run(dev: DevServer, model: str, inputs: dict) -> httpx.Response:
    return httpx.post(dev.url + "/", json={"model": model, "inputs": inputs}, timeout=180)


def test_a_classic_id_answers_response_and_usage_read_as_item_or_attribute(dev: DevServer) -> None:
    body = _run(dev, LLAMA, {"prompt": "hi", "max_tokens": 5}).json()
    result = body["result"]
    assert set(result) == {"response", "tool_calls", "usage"}, result
    assert isinstance(result["response"], str) and body["attr"] == result["response"]
    assert result["tool_calls"] == []
    usage = result["usage"]
    assert usage["completion_tokens"] <= 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_a_classic_stream_is_response_events_then_usage_then_done(dev: DevServer) -> None:
    inputs = {"messages": HI, "max_tokens": 6, "stream": True, "temperature": 0}
    events = parse_sse(_run(dev, LLAMA, inputs).content)
    assert events[-1] == "[DONE]"
    last = events[-2]
    assert last["response"] == "" and last["usage"]["completion_tokens"] <= 6, events
    pieces = events[:-2]
    assert pieces and all(set(e) == {"response"} for e in pieces), events
    whole = _run(dev, LLAMA, {**inputs, "stream": False}).json()["result"]
    assert "".join(e["response"] for e in pieces) == whole["response"]


def test_a_classic_tool_call_has_object_arguments_whole_and_streamed(dev: DevServer) -> None:
    inputs = {"messages": HI, "tools": [FLAT_TOOL], "tool_choice": NAMED, "max_tokens": 200}
    result = _run(dev, LLAMA, inputs).json()["result"]
    (call,) = result["tool_calls"]
    assert call["name"] == "get_weather" and isinstance(call["arguments"], dict), result
    jsonschema.validate(call["arguments"], UNIT)
    events = parse_sse(_run(dev, LLAMA, {**inputs, "stream": True}).content)
    (streamed,) = [e for e in events if isinstance(e, dict) and e.get("tool_calls")]
    assert streamed["response"] == ""
    (streamed_call,) = streamed["tool_calls"]  # sampled anew (temperature 0.6): same shape
    assert streamed_call["name"] == "get_weather" and isinstance(streamed_call["arguments"], dict)
    jsonschema.validate(streamed_call["arguments"], UNIT)


def test_json_mode_response_is_an_object(dev: DevServer) -> None:
    fmt = {"type": "json_schema", "json_schema": UNIT}
    inputs = {"messages": HI, "response_format": fmt, "max_tokens": 200}
    result = _run(dev, LLAMA, inputs).json()["result"]
    assert isinstance(result["response"], dict), result
    jsonschema.validate(result["response"], UNIT)


def test_rest_is_classic_and_ai_v1_stays_openai(dev: DevServer) -> None:
    url = f"{dev.url}/client/v4/accounts/local/ai/run/{LLAMA}"
    rest = httpx.post(url, json={"prompt": "hi", "max_tokens": 3}, timeout=180).json()
    assert rest["success"] and set(rest["result"]) == {"response", "tool_calls", "usage"}
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", timeout=180)
    chat = client.chat.completions.create(
        model=LLAMA, messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert chat.object == "chat.completion" and chat.model == LLAMA


def test_the_schema_field_keeps_a_classic_id_on_chat_completions(dev: DevServer) -> None:
    result = _run(dev, LLAMA_CHAT, {"prompt": "hi", "max_tokens": 3}).json()["result"]
    assert result["object"] == "chat.completion" and result["model"] == LLAMA_CHAT
    # The model list says which schema each id answers in.
    listed = httpx.get(dev.url + "/ai/v1/models", timeout=60).json()["data"]
    schemas = {row["id"]: row["ember"]["schema"] for row in listed}
    assert schemas[LLAMA] == "classic" and schemas[LLAMA_CHAT] == "chat-completions"
    assert schemas["@cf/zai-org/glm-4.7-flash"] == "chat-completions"


def test_an_unmapped_id_says_what_is_served_and_how_to_map_it(dev: DevServer) -> None:
    platform = f"5007: No such model {UNMAPPED} or task"
    key = f'ai.models."{UNMAPPED}".checkpoint'
    error = _run(dev, UNMAPPED, {"prompt": "hi"}).json()
    assert error["type"] == "InferenceUpstreamError" and error["message"].startswith(platform)
    assert LLAMA in error["message"] and key in error["message"], error
    rest = httpx.post(f"{dev.url}/client/v4/accounts/local/ai/run/{UNMAPPED}", json={})
    assert rest.status_code == 400
    (failure,) = rest.json()["errors"]
    assert failure["code"] == 5007 and failure["message"].startswith(platform[6:])
    assert key in failure["message"]
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused")
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model=UNMAPPED, messages=HI)
    error_body = missing.value.body
    assert isinstance(error_body, dict) and error_body["code"] == "model_not_found"
    assert error_body["param"] == "model" and key in error_body["message"]
    assert error_body["message"].startswith(f"The model `{UNMAPPED}` does not exist")


def test_cli_run_prints_a_classic_answer_and_the_hint(dev: DevServer) -> None:
    command = [sys.executable, "-m", "ember", "ai", "run", "--url", dev.url]
    done = subprocess.run(
        [*command, LLAMA, "hi", "--max-tokens", "3"],
        capture_output=True,
        text=True,
        env=ember_env(),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    missing = subprocess.run(
        [*command, UNMAPPED, "hi"], capture_output=True, text=True, env=ember_env(), timeout=180
    )
    assert missing.returncode != 0
    assert f"5007: No such model {UNMAPPED} or task" in missing.stderr
    assert f'ai.models."{UNMAPPED}".checkpoint' in missing.stderr, missing.stderr
    assert json.dumps(LLAMA)[1:-1] in missing.stderr


def test_the_classic_schemas_ranges_hold_on_the_way_in(dev: DevServer) -> None:
    url = f"{dev.url}/client/v4/accounts/local/ai/run/{LLAMA}"
    bad = httpx.post(url, json={"prompt": "hi", "top_k": 0}, timeout=60)
    assert bad.status_code == 400
    error = bad.json()["errors"][0]
    assert error["code"] == 5006 and "/top_k" in error["message"] and "1 to 50" in error["message"]
    ok = httpx.post(url, json={"prompt": "hi", "max_tokens": 3, "n": 2}, timeout=180).json()
    assert ok["success"] and ok["result"]["usage"]["completion_tokens"] <= 3
