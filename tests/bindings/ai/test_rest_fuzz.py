"""No REST request can hurt another: hostile Workers AI bodies against a real ``ember dev``.

hypothesis mutates a valid ``ai/run`` body for the GLM id (``fuzz_bodies``' hostile values) and
sends it while a canary ``ai/run`` runs on another connection. Every answer must be a 200 (the
success envelope, or a stream that ends with ``[DONE]`` or an error event) or Workers AI's
failure envelope: 5006 naming the field, 5007 for an unknown model, never a 5xx. Derandomized
and small by default; ``EMBER_FUZZ_EXAMPLES`` explores further.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest
from hypothesis import strategies as st

from tests.bindings.ai.dev_support import DevServer, serve_ai_project
from tests.bindings.ai.support import GLM
from tests.models.server.fuzz_bodies import (
    CHAT,
    EXTREMES,
    NOT_OBJECTS,
    VALUES,
    Hostile,
    dumps,
    hostile_requests,
)
from tests.models.server.fuzz_checks import (
    CLIENT_TIMEOUT,
    check_answer,
    fuzz_beside_a_canary,
    raw_events,
    strict_json,
)

EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "30")) // 2
SEED = int(os.environ["EMBER_FUZZ_SEED"]) if os.environ.get("EMBER_FUZZ_SEED") else None
RUN = "/client/v4/accounts/fuzz/ai/run/"
FIELDS = [
    "prompt", "messages", "messages.0", "messages.0.role", "messages.0.content", "max_tokens",
    "temperature", "top_p", "top_k", "seed", "repetition_penalty", "frequency_penalty",
    "presence_penalty", "stream", "raw", "lora", "tools", "tools.0.function.parameters",
    "response_format", "response_format.json_schema", "functions", "options",
    "options.rejectIfBusy", "options.gateway", "chat_template_kwargs", "unknown_field_zz",
]  # fmt: skip
CANARY = {"prompt": "Hi", "max_tokens": 2}


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-ai-fuzz")


@st.composite
def rest_requests(draw: st.DrawFn) -> tuple[str, bytes]:
    model = draw(
        st.sampled_from([GLM] * 8 + ["@cf/nope/missing", "%40cf%2Fzai-org%2Fglm-4.7-flash"])
    )
    if draw(st.integers(0, 7)) == 0:
        return model, draw(st.sampled_from(NOT_OBJECTS))
    body: dict[str, Any] = {"prompt": "Hi", "max_tokens": 3}
    if draw(st.booleans()):
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
    if draw(st.booleans()):
        body["stream"] = True
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(FIELDS))
        node: Any = body
        parts = key.split(".")
        for part in parts[:-1]:
            if isinstance(node, list):
                node = node[0] if node and isinstance(node[0], dict) else {}
            else:
                child = node.get(part)
                node = child if isinstance(child, (dict, list)) else node.setdefault(part, {})
                if not isinstance(node, (dict, list)):
                    node = {}
        if isinstance(node, dict):
            node[parts[-1]] = draw(VALUES)
    return model, dumps(body).encode()


def _problems(response: httpx.Response, model: str) -> list[str]:
    status = response.status_code
    if status >= 500 or 200 < status < 400:
        return [f"status {status}: {response.text[:400]}"]
    if status == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
        events = raw_events(response.content)
        if not events or (events[-1] != "[DONE]" and "error" not in strict_json(events[-1])):
            return [f"a stream that does not end properly: {events[-3:]}"]
        return []
    try:
        body = strict_json(response.text)
    except ValueError as exc:
        return [f"not strict JSON ({exc}): {response.text[:300]}"]
    if status == 200:
        return [] if body.get("success") is True else [f"a 200 without success: {body}"]
    if set(body) != {"result", "success", "errors", "messages"} or body["success"] is not False:
        return [f"a {status} without the Workers AI envelope: {body}"]
    error = body["errors"][0]
    # The body's options are read before the model is looked up: a bad one may come first.
    if "missing" in model and error["code"] not in (5006, 5007):
        return [f"an unknown model answered {error}"]
    # Named as a location (Invalid value at '/max_tokens') or as the subject of the sentence
    # (max_tokens is 9223372036854775808, but the prompt leaves room for 4089), which follows
    # OpenAI's words on a context overflow ("...in the completion). Please reduce ...: ").
    if error["code"] == 5006 and not re.search(r" at '|(^Error: |: )[a-z_]+ is ", error["message"]):
        return [f"a 5006 naming no field: {error}"]
    return []


def _send(client: httpx.Client, url: str, model: str, body: bytes) -> list[str]:
    headers = {"content-type": "application/json"}
    try:
        response = client.post(
            url + RUN + model, content=body, headers=headers, timeout=CLIENT_TIMEOUT
        )
    except httpx.HTTPError as exc:
        return [f"no answer: {exc!r}"]
    return _problems(response, model)


def _canary(client: httpx.Client, url: str) -> list[str]:
    response = client.post(url + RUN + GLM, json=CANARY, timeout=CLIENT_TIMEOUT)
    body = response.json()
    if response.status_code != 200 or body["result"]["usage"]["completion_tokens"] != 2:
        return [f"canary got {response.status_code}: {json.dumps(body)[:300]}"]
    return []


def test_hostile_rest_bodies_hurt_nobody(dev: DevServer) -> None:
    assert not _canary(httpx.Client(), dev.url)  # loads the model before the clock matters
    problems = fuzz_beside_a_canary(
        rest_requests(),
        lambda client, request: _send(client, dev.url, *request),
        lambda client: _canary(client, dev.url),
        lambda request: f"POST {RUN}{request[0]} {request[1][:500]!r}",
        examples=EXAMPLES,
        seed_value=SEED,
    )
    assert not problems, "\n".join(problems)


KNOBS = [
    "max_tokens", "temperature", "top_p", "top_k", "seed", "repetition_penalty",
    "frequency_penalty", "presence_penalty",
]  # fmt: skip


def test_every_rest_knob_at_every_extreme(dev: DevServer) -> None:
    problems: list[str] = []
    with ThreadPoolExecutor(2) as pool, httpx.Client() as client, httpx.Client() as other:
        for knob in KNOBS:
            for value in EXTREMES:
                body = dumps({"prompt": "Hi", "max_tokens": 3, knob: value}).encode()
                answer = pool.submit(_send, client, dev.url, GLM, body)
                canary = pool.submit(_canary, other, dev.url)
                found = answer.result() + canary.result()
                problems.extend(f"{knob}={value!r}: {p}" for p in found)
    assert not problems, "\n".join(problems)


def test_hostile_openai_bodies_through_the_gateway_hurt_nobody(dev: DevServer) -> None:
    """The gateway's OpenAI-compatible route: the model server's hostile chat bodies, for the
    GLM id; the same invariants as on the model server (fuzz_checks.check_answer)."""
    problems = fuzz_beside_a_canary(
        hostile_requests(CHAT, GLM).map(lambda h: replace(h, path="/ai/v1/chat/completions")),
        lambda client, hostile: _send_openai(client, dev.url, hostile),
        lambda client: _canary(client, dev.url),
        Hostile.describe,
        examples=EXAMPLES,
        seed_value=SEED,
    )
    assert not problems, "\n".join(problems)


def _send_openai(client: httpx.Client, url: str, hostile: Hostile) -> list[str]:
    headers = {} if hostile.content_type is None else {"content-type": hostile.content_type}
    try:
        response = client.post(
            url + hostile.path, content=hostile.body, headers=headers, timeout=CLIENT_TIMEOUT
        )
    except httpx.HTTPError as exc:
        return [f"no answer: {exc!r}"]
    return check_answer(response, hostile)
