"""Tool schemas over the wire, on real servers with the shipped tiny checkpoints: pydantic's
``$defs``/``$ref`` parameters (and a root ``$ref``) get calls that keep ``required`` on GLM as on
Kimi (a 400, or a call with no arguments, before), a ``strict`` tool's unenforceable keyword is a
400 naming it, and with ``tool_choice: auto`` every call to a strict tool has valid arguments."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from tests.models.server.live import LiveServer

REF_PARAMS = {
    "type": "object",
    "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
    "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"$ref": "#/$defs/Unit"}},
    "required": ["city", "unit"],
}
PLAIN = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
ROOT_REF = {"$ref": "#/$defs/A", "$defs": {"A": PLAIN}}


def _post(live: LiveServer, parameters: dict, choice: object, **extra: object) -> httpx.Response:
    model = httpx.get(live.url + "/v1/models", timeout=30).json()["data"][0]["id"]
    function = {"name": "w", "parameters": parameters, **extra.pop("function", {})}  # type: ignore[dict-item]
    return httpx.post(
        live.url + "/v1/chat/completions",
        json={
            "model": model,
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [{"type": "function", "function": function}],
            "tool_choice": choice,
            "max_completion_tokens": 160,
            **extra,
        },
        timeout=300,
    )


def _calls(reply: httpx.Response) -> list[dict]:
    """The calls' arguments; none from an answer max_completion_tokens cut short."""
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    if choice["finish_reason"] == "length":
        return []
    calls = choice["message"].get("tool_calls") or []
    return [json.loads(c["function"]["arguments"]) for c in calls]


@pytest.mark.parametrize("parameters", [REF_PARAMS, ROOT_REF], ids=["defs", "root-ref"])
@pytest.mark.parametrize("server", ["glm", "kimi"])
def test_ref_parameters_get_calls_that_keep_required(
    server: str, parameters: dict, request: pytest.FixtureRequest
) -> None:
    live = request.getfixturevalue(server)
    named = {"type": "function", "function": {"name": "w"}}
    checked = 0
    for choice in ("required", named):
        for seed in range(2):
            for arguments in _calls(_post(live, parameters, choice, seed=seed)):
                jsonschema.Draft202012Validator(parameters).validate(arguments)
                checked += 1
    assert checked


def test_a_strict_tool_with_a_keyword_ember_cannot_enforce_is_a_400(glm: LiveServer) -> None:
    parameters = {
        "type": "object",
        "properties": {"iban": {"type": "string", "pattern": "^(?=DE)[A-Z0-9]{22}$"}},
        "required": ["iban"],
        "additionalProperties": False,
    }
    assert _post(glm, parameters, "auto").status_code == 200  # a hint when not strict
    reply = _post(glm, parameters, "auto", function={"strict": True})
    assert reply.status_code == 400, reply.text
    assert "properties.iban.pattern" in reply.text, reply.text


@pytest.mark.parametrize("server", ["glm", "kimi"])
def test_auto_calls_to_a_strict_tool_have_valid_arguments(
    server: str, request: pytest.FixtureRequest
) -> None:
    live = request.getfixturevalue(server)
    checked = 0
    for seed in range(4):
        reply = _post(live, PLAIN, "auto", function={"strict": True}, seed=seed)
        for arguments in _calls(reply):
            jsonschema.Draft202012Validator(PLAIN).validate(arguments)
            checked += 1
    # The tiny models start calls they cannot finish: unconstrained, none of those 4 answers
    # held a call the parser could read (each ended 'stop' with neither content nor calls).
    assert checked
