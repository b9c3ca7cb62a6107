"""``ember dev`` as a user runs it: the Workers AI REST API and the OpenAI-compatible API on
the dev server's port, the official ``openai`` client, and ``ember ai models|run --url``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import jsonschema
import openai
import pytest

from ember.models.api.sse import parse_sse
from tests.bindings.ai.dev_support import DevServer, ember_env, serve_ai_project
from tests.bindings.ai.support import GLM

UNIT = {
    "type": "object",
    "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["unit"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-ai")


def test_dev_server_is_ready_before_any_model_loads(dev: DevServer) -> None:
    # Lazy: nothing was started by starting the dev server.
    assert not any("starting (ember cpu)" in line for line in dev.lines)
    response = httpx.get(dev.url + "/", timeout=120)
    assert response.status_code == 200 and response.json()["model"] == GLM
    # ...and the first request printed the model's loading progress.
    assert any("loaded Glm4MoeForCausalLM weights" in line for line in dev.lines)
    assert any("ready in" in line for line in dev.lines)


@pytest.mark.parametrize("path", ["%40cf%2Fzai-org%2Fglm-4.7-flash", "@cf/zai-org/glm-4.7-flash"])
def test_rest_run_envelope(dev: DevServer, path: str) -> None:
    response = httpx.post(
        f"{dev.url}/client/v4/accounts/acct/ai/run/{path}",
        json={"prompt": "Hello", "max_tokens": 3, "options": {"rejectIfBusy": False}},
        headers={"authorization": "Bearer anything", "x-session-affinity": "ses_rest"},
        timeout=60,
    )
    body = response.json()
    assert response.status_code == 200 and body["success"] is True
    assert body["errors"] == [] and body["messages"] == []
    assert body["result"]["usage"]["completion_tokens"] == 3


def test_rest_errors_and_stream(dev: DevServer) -> None:
    missing = httpx.post(f"{dev.url}/client/v4/accounts/a/ai/run/@cf/x/y", json={"prompt": "x"})
    assert missing.status_code == 400
    body = missing.json()
    (error,) = body.pop("errors")
    assert body == {"result": None, "success": False, "messages": []}
    # The platform's text first (scripts match it), then what ember serves and how to map it.
    assert error["code"] == 5007
    assert error["message"].startswith("No such model @cf/x/y or task. ember serves ")
    assert 'ai.models."@cf/x/y".checkpoint' in error["message"]
    # An unknown model is a 5007 whatever else is wrong: the platform looks the model up first.
    bad_options = {"prompt": "x", "options": {"gateway": {"id": "g", "cacheTtl": -1}}}
    both = httpx.post(f"{dev.url}/client/v4/accounts/a/ai/run/@cf/x/y", json=bad_options)
    assert both.status_code == 400 and both.json()["errors"][0]["code"] == 5007
    chat = httpx.post(
        f"{dev.url}/ai/v1/chat/completions",
        json={"model": "@cf/x/y", "messages": [{"role": "user", "content": "x"}],
              "options": {"gateway": {"id": "g", "cacheTtl": -1}}},
    )  # fmt: skip
    # ... and on /ai/v1 it is OpenAI's 404 model_not_found (test_responses_http.py).
    assert chat.status_code == 404, chat.text
    assert chat.json()["error"]["code"] == "model_not_found"
    invalid = httpx.post(f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}", content=b"[1]")
    assert invalid.status_code == 400 and invalid.json()["errors"][0]["code"] == 5006
    stream = httpx.post(
        f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}",
        json={"prompt": "Hello", "max_tokens": 4, "stream": True},
        timeout=60,
    )
    assert stream.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(stream.content)
    assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] == 4


def test_official_openai_client(dev: DevServer) -> None:
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", max_retries=0)
    ids = [m.id for m in client.models.list()]
    assert GLM in ids and "@cf/moonshotai/kimi-k2.5" in ids
    reply = client.chat.completions.create(
        model=GLM, messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert reply.model == GLM and reply.usage.completion_tokens == 4
    chunks = list(
        client.chat.completions.create(
            model=GLM,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage.completion_tokens == 4
    tool = {"type": "function", "function": {"name": "units", "parameters": UNIT}}
    called = client.chat.completions.create(
        model=GLM,
        messages=[{"role": "user", "content": "Which unit?"}],
        tools=[tool],
        tool_choice="required",
        max_tokens=100,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    arguments = called.choices[0].message.tool_calls[0].function.arguments
    jsonschema.validate(json.loads(arguments), UNIT)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=GLM, messages=[{"role": "user", "content": 1}])
    assert "5006: Error: Invalid value at '/messages/0/content'" in str(bad.value)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="@cf/x/y", messages=[{"role": "user", "content": "x"}])
    assert unknown.value.code == "model_not_found"


def _ember(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        capture_output=True,
        text=True,
        env=ember_env(),
        timeout=120,
    )


def test_cli_models_and_run_against_the_dev_server(dev: DevServer) -> None:
    listed = _ember("ai", "models", "--url", dev.url)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(GLM))
    assert "Glm4MoeForCausalLM" in row and "131,072" in row and row.rstrip().endswith("yes")
    as_json = json.loads(_ember("ai", "models", "--url", dev.url, "--json").stdout)
    assert {r["id"]: r["loaded"] for r in as_json}[GLM] is True
    ran = _ember("ai", "run", GLM, "Hello", "--url", dev.url, "--json", "--max-tokens", "3")
    assert json.loads(ran.stdout)["usage"]["completion_tokens"] == 3
    streamed = _ember(
        "ai", "run", GLM, "Hi", "--url", dev.url, "--stream", "--json", "--max-tokens", "3"
    )
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert events[-1]["usage"]["completion_tokens"] == 3
    missing = _ember("ai", "run", "@cf/x/y", "Hi", "--url", dev.url)
    assert missing.returncode == 1 and "5007: No such model @cf/x/y or task" in missing.stderr


def test_cli_run_streams_tokens_as_they_arrive(dev: DevServer) -> None:
    command = [sys.executable, "-m", "ember", "ai", "run", GLM, "Hi", "--url", dev.url]
    command += ["--stream", "--max-tokens", "300", "--no-thinking", "--ignore-eos"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=ember_env())
    assert process.stdout is not None
    first = process.stdout.read1(65536)  # returns as soon as some output exists
    still_generating = process.poll() is None
    rest = process.stdout.read()
    assert process.wait(60) == 0
    assert first and rest and still_generating  # text appeared while the model was generating


def test_the_model_list_says_how_much_context_a_request_may_use(dev: DevServer) -> None:
    # The id's window is the platform's (131,072 tokens); the checkpoint behind it serves what
    # its config allows, and a prompt past that is refused. The list must say so up front.
    listed = {m["id"]: m for m in httpx.get(dev.url + "/ai/v1/models", timeout=30).json()["data"]}
    glm = listed[GLM]
    served = glm["max_context"]
    assert glm["context_window"] == 131_072 and served < 131_072
    assert glm["max_model_len"] == served
    words = " ".join(["word"] * served)
    too_long = httpx.post(
        f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}",
        json={"prompt": words, "max_tokens": 1},
        timeout=120,
    )
    assert too_long.status_code == 400 and f"at most {served - 1} prompt tokens" in too_long.text
    table = _ember("ai", "models", "--url", dev.url)
    row = next(line for line in table.stdout.splitlines() if line.startswith(GLM))
    assert f"{served:,} (id: 131,072)" in row


def test_openai_client_retrieves_one_model(dev: DevServer) -> None:
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", max_retries=0)
    model = client.models.retrieve(GLM)
    assert model.id == GLM and model.object == "model"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("@cf/x/y")
    assert missing.value.code == "model_not_found" and "`@cf/x/y` does not exist" in str(
        missing.value
    )


def test_usage_counts_the_tokens_spent_thinking(dev: DevServer) -> None:
    # usage.completion_tokens_details.reasoning_tokens, as the platform's chat completions
    # report it: a thinking model cut off by max_tokens shows where the budget went.
    url = f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}"
    ask = {"prompt": "What is a Python generator?", "max_tokens": 6, "temperature": 0}
    thought = httpx.post(url, json=ask, timeout=120).json()["result"]
    message, usage = thought["choices"][0]["message"], thought["usage"]
    assert message["reasoning_content"] and message["content"] is None  # still thinking
    assert message["reasoning"] == message["reasoning_content"]  # vLLM's name, through too
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 6}
    streamed = parse_sse(httpx.post(url, json={**ask, "stream": True}, timeout=120).content)
    assert streamed[-2]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 6}
    plain = {**ask, "chat_template_kwargs": {"enable_thinking": False}}
    answered = httpx.post(url, json=plain, timeout=120).json()["result"]
    assert answered["usage"]["completion_tokens_details"] == {"reasoning_tokens": 0}
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=GLM,
        messages=[{"role": "user", "content": ask["prompt"]}],
        max_tokens=6,
        temperature=0,  # the platform's default of 1 may end the thinking within 6 tokens
    )
    assert reply.usage.completion_tokens_details.reasoning_tokens == 6


def test_model_search_pages_and_filters_like_the_platform(dev: DevServer) -> None:
    # The cloudflare SDK pages until a page comes back empty, and wrangler's
    # `ai models --search/--author/--task` leaves the filtering to the server.
    from cloudflare import Cloudflare

    sdk = Cloudflare(api_token="unused", base_url=dev.url + "/client/v4", max_retries=0)
    every = []
    for model in sdk.ai.models.list(account_id="local", per_page=3):
        every.append(model["name"])
        assert len(every) <= 100, "the SDK kept paging: pages never ended"
    listed = [m["id"] for m in httpx.get(dev.url + "/ai/v1/models", timeout=30).json()["data"]]
    assert every == listed

    def search(**query: str) -> list[str]:
        url = f"{dev.url}/client/v4/accounts/local/ai/models/search"
        body = httpx.get(url, params=query, timeout=30).json()
        assert body["success"] is True, body
        return [m["name"] for m in body["result"]]

    assert search(search="KIMI") == [m for m in listed if "kimi" in m]
    assert search(author="zai-org") == [m for m in listed if m.startswith("@cf/zai-org/")]
    assert search(task="Text Generation") == listed
    assert search(task="Text Embeddings") == []
    assert search(per_page="2", page="2") == listed[2:4]
    assert search(hide_experimental="true") == listed
    bad = httpx.get(f"{dev.url}/client/v4/accounts/local/ai/models/search?per_page=x", timeout=30)
    assert bad.status_code == 400 and bad.json()["success"] is False
    assert "per_page" in bad.json()["errors"][0]["message"]


def test_unserved_ai_paths_say_what_is_served(dev: DevServer) -> None:
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="@cf/baai/bge-m3", input="hi")
    message = str(missing.value)
    assert "/embeddings" in message and "/chat/completions" in message
    rest = httpx.get(f"{dev.url}/client/v4/accounts/a/ai/finetunes", timeout=30)
    body = rest.json()
    assert rest.status_code == 404 and body["success"] is False and body["result"] is None
    assert "/ai/finetunes" in body["errors"][0]["message"]


def test_a_served_path_with_the_wrong_method_is_a_405_in_the_callers_shape(dev: DevServer) -> None:
    run = httpx.get(f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}", timeout=30)
    assert run.status_code == 405 and run.headers["allow"] == "POST"
    body = run.json()
    assert body["success"] is False and body["result"] is None and body["messages"] == []
    (error,) = body["errors"]
    assert error["code"] == 7001
    assert error["message"].startswith("Method GET not allowed for /client/v4/accounts/a/ai/run/")
    assert "allowed: POST" in error["message"]
    chat = httpx.get(f"{dev.url}/ai/v1/chat/completions", timeout=30)
    assert chat.status_code == 405 and chat.headers["allow"] == "POST"
    assert chat.json()["error"]["code"] == "method_not_allowed"
    assert "allowed: POST" in chat.json()["error"]["message"]


@pytest.mark.parametrize("prefix", ["/ai/v1", "/client/v4/accounts/acct/ai/v1"])
def test_openai_answers_name_their_request_id_in_x_request_id(dev: DevServer, prefix: str) -> None:
    """openai-node (6.49, src/core/api-promise.ts, src/internal/parse.ts) and the Python client
    read ``_request_id`` from the ``x-request-id`` header (vLLM sends it too): the same id as
    ``cf-ai-req-id``, which stays. It was null against ember."""
    ask = {"model": GLM, "max_tokens": 2, "chat_template_kwargs": {"enable_thinking": False}}
    chat = {**ask, "messages": [{"role": "user", "content": "hi"}]}
    responses = {"model": GLM, "input": "hi", "max_output_tokens": 2}
    for path, body in (("/chat/completions", chat), ("/responses", responses)):
        for stream in (False, True):
            reply = httpx.post(
                dev.url + prefix + path, json={**body, "stream": stream}, timeout=120
            )
            assert reply.status_code == 200, reply.text
            request_id = reply.headers["cf-ai-req-id"]
            assert request_id and reply.headers["x-request-id"] == request_id, (path, stream)
    api = openai.OpenAI(base_url=dev.url + prefix, api_key="unused", max_retries=0, timeout=120)
    answer = api.chat.completions.create(
        model=GLM, messages=chat["messages"], max_tokens=2, extra_body={"chat_template_kwargs": {}}
    )
    assert answer._request_id and answer._request_id == answer.id.removeprefix("chatcmpl-")


def test_rest_run_answers_and_openai_errors_carry_x_request_id(dev: DevServer) -> None:
    """``x-request-id`` on every REST ``ai/run`` answer (the same id as ``cf-ai-req-id`` on an
    answer, a fresh one on a failure) and on every ``/ai/v1`` error: openai-node reads it as
    ``APIError.request_id``, which was null against ember."""
    run = f"{dev.url}/client/v4/accounts/acct/ai/run/{GLM}"
    for stream in (False, True):
        ask = {"prompt": "hi", "max_tokens": 2, "stream": stream}
        answered = httpx.post(run, json=ask, timeout=120)
        assert answered.status_code == 200, answered.text
        assert answered.headers["x-request-id"] == answered.headers["cf-ai-req-id"], stream
    failures = [
        httpx.post(f"{dev.url}/client/v4/accounts/acct/ai/run/@cf/x/y", json={"prompt": "x"}),
        httpx.post(run, content=b"not json", timeout=30),
        httpx.post(f"{dev.url}/ai/v1/chat/completions", content=b"not json", timeout=30),
        httpx.post(
            f"{dev.url}/client/v4/accounts/acct/ai/v1/chat/completions",
            json={"model": "@cf/x/y", "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        ),
        httpx.get(f"{dev.url}/ai/v1/models/@cf/x/y", timeout=30),
        httpx.get(f"{dev.url}/ai/v1/chat/completions", timeout=30),
        httpx.get(f"{dev.url}/ai/v1/embeddings", timeout=30),
        httpx.get(run, timeout=30),  # 405 (7001), from the REST fallback route
        httpx.post(f"{dev.url}/client/v4/accounts/acct/ai/run", json={}, timeout=30),  # 7000
    ]
    ids = []
    for failed in failures:
        assert failed.status_code >= 400, (failed.request.url, failed.text)
        ids.append(failed.headers.get("x-request-id"))
        assert ids[-1], (failed.request.url, failed.status_code, dict(failed.headers))
    assert len(set(ids)) == len(ids)  # one per answer
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("@cf/x/y")
    assert missing.value.request_id
