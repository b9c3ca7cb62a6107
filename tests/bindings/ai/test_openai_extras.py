"""``/ai/v1/chat/completions`` and vLLM's and SGLang's request extras: those both of ember's
model server and SGLang accept reach the replica (vLLM's ``include_stop_str_in_output`` as
SGLang's ``no_stop_trim``), SGLang's ``matched_stop`` comes back, and the fields no replica is
sent are named in ``x-ember-ignored-fields`` (Workers AI ignores unknown fields; ember does too,
but not in silence). ``env.AI.run`` keeps Workers AI's schema."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from ember.bindings.ai.dialects import completion_result, upstream_request
from ember.models.api.sse import parse_sse
from tests.bindings.ai.dev_support import DevServer, serve_ai_project
from tests.bindings.ai.support import GLM

MESSAGES = [{"role": "user", "content": "write python code"}]
EXTRAS = {
    "stop_token_ids": [7],
    "continue_final_message": False,
    "skip_special_tokens": False,
    "no_stop_trim": True,
    "separate_reasoning": False,
    "regex": "[a-z]+",
}


def test_the_extras_both_replicas_accept_are_forwarded_on_the_openai_dialect() -> None:
    body = upstream_request(GLM, {"messages": MESSAGES, **EXTRAS}, "openai", stream=False).body
    assert {key: body.get(key) for key in EXTRAS} == EXTRAS
    vllm = {"messages": MESSAGES, "include_stop_str_in_output": True}
    assert upstream_request(GLM, vllm, "openai", stream=False).body["no_stop_trim"] is True
    workers = upstream_request(GLM, {"messages": MESSAGES, **EXTRAS}, "workers", stream=False)
    assert not set(EXTRAS) & set(workers.body)  # Workers AI's schema has none of them


def test_matched_stop_is_kept_for_the_openai_dialect_only() -> None:
    def body() -> dict:
        return {"model": "x", "choices": [{"index": 0, "matched_stop": 2, "message": {}}]}

    assert completion_result(body(), GLM, keep_matched_stop=True)["choices"][0]["matched_stop"] == 2  # type: ignore[index]
    assert "matched_stop" not in completion_result(body(), GLM)["choices"][0]  # type: ignore[index]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-extras")


def _chat(dev: DevServer, **body: object) -> httpx.Response:
    body = {"model": GLM, "messages": MESSAGES, "max_tokens": 12, "temperature": 0} | body
    body.setdefault("chat_template_kwargs", {"enable_thinking": False})
    reply = httpx.post(f"{dev.url}/ai/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply


def test_stop_strings_kept_and_matched_stop_through_ai_v1(dev: DevServer) -> None:
    plain = _chat(dev).json()["choices"][0]["message"]["content"]
    starts = [i for i in range(3, len(plain) - 1) if plain[i : i + 2].isalnum()]
    assert starts, plain
    stop = plain[starts[0] : starts[0] + 2]  # first seen after the answer's start
    cut = _chat(dev, stop=[stop]).json()["choices"][0]
    assert cut["matched_stop"] == stop and not cut["message"]["content"].endswith(stop)
    kept = _chat(dev, stop=[stop], include_stop_str_in_output=True).json()["choices"][0]
    assert kept["message"]["content"].endswith(stop), (plain, stop, kept)
    events = parse_sse(_chat(dev, stop=[stop], stream=True).content)
    finish = [
        e["choices"][0] for e in events[:-1] if e["choices"] and e["choices"][0]["finish_reason"]
    ]
    assert finish[-1]["matched_stop"] == stop
    assert "x-ember-ignored-fields" not in _chat(dev, stop=[stop]).headers


def test_fields_no_replica_is_sent_are_named_in_a_header(dev: DevServer) -> None:
    extras = {"echo": True, "prompt_logprobs": 1, "add_generation_prompt": True, "bogus": 1}
    reply = _chat(dev, **extras)
    assert (
        reply.headers["x-ember-ignored-fields"]
        == "add_generation_prompt, bogus, echo, prompt_logprobs"
    )
    streamed = _chat(dev, stream=True, bogus=1)
    assert streamed.headers["x-ember-ignored-fields"] == "bogus"


def test_odd_or_many_ignored_keys_never_break_the_answer(dev: DevServer) -> None:
    # A key with CR/LF dropped the connection and one outside latin-1 gave a 500, after the model
    # had run; thousands of keys made a header past clients' limits. Only plain names are listed.
    odd = {"a\r\nx-evil: 1": 1, "中": 2, **{f"k{i:04}": i for i in range(3000)}}
    for stream in (False, True):
        reply = _chat(dev, stream=stream, **odd)
        header = reply.headers["x-ember-ignored-fields"]
        assert header.startswith("k0000, k0001, ") and header.endswith(", and 2982 more")
        assert "x-evil" not in reply.headers and len(header) < 300


# vLLM's structured-output fields (vllm/entrypoints/openai/chat_completion/protocol.py:
# ``structured_outputs: StructuredOutputsParams`` with json / regex / choice / json_object, and
# the older guided_json / guided_regex / guided_choice of vLLM <= 0.10): enforced by ember's model
# server, so the gateway forwards each as the field both replicas read (SGLang's protocol.py
# ChatCompletionRequest: ``regex``, ``response_format``) instead of dropping it.
CHOICE_REGEX = "(?:yes|no|maybe\\?)"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
AS_FORMAT = {"type": "json_schema", "json_schema": {"name": "guided_json", "schema": SCHEMA}}
GUIDED = [
    ({"guided_regex": "[a-z]+"}, {"regex": "[a-z]+"}),
    ({"structured_outputs": {"regex": "[a-z]+"}}, {"regex": "[a-z]+"}),
    ({"guided_choice": ["yes", "no", "maybe?"]}, {"regex": CHOICE_REGEX}),
    ({"structured_outputs": {"choice": ["yes", "no", "maybe?"]}}, {"regex": CHOICE_REGEX}),
    (
        {"guided_json": SCHEMA},
        {"response_format": AS_FORMAT},
    ),
    (
        {"guided_json": json.dumps(SCHEMA)},
        {"response_format": AS_FORMAT},
    ),
    (
        {"structured_outputs": {"json": SCHEMA}},
        {"response_format": AS_FORMAT},
    ),
    ({"structured_outputs": {"json_object": True}}, {"response_format": {"type": "json_object"}}),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "forwarded"), GUIDED)
def test_vllm_structured_outputs_reach_the_replica_as_fields_both_backends_read(
    fields: dict, forwarded: dict
) -> None:
    body = upstream_request(GLM, {"messages": MESSAGES, **fields}, "openai", stream=False).body
    assert {key: body.get(key) for key in forwarded} == forwarded
    assert not {"guided_regex", "guided_choice", "guided_json", "structured_outputs"} & set(body)


def test_request_level_structured_output_backends_are_refused_as_vllm_v1_does() -> None:
    # vllm/v1/engine/processor.py: "Request-level structured output backend selection is no
    # longer supported" unless it names the engine's own backend; ember has one, "auto" to vLLM.
    from ember.models.api.errors import InvalidRequestField

    body = {"messages": MESSAGES, "guided_json": SCHEMA}
    for backend in ("xgrammar", "outlines:no-fallback", 1):
        with pytest.raises(InvalidRequestField) as refused:
            upstream_request(
                GLM, {**body, "guided_decoding_backend": backend}, "openai", stream=False
            )
        assert refused.value.field == "/guided_decoding_backend"
    for backend in ("auto", None):
        upstream_request(GLM, {**body, "guided_decoding_backend": backend}, "openai", stream=False)


def test_guided_fields_are_enforced_through_ai_v1_and_not_named_ignored(dev: DevServer) -> None:
    for stream in (False, True):
        reply = _chat(
            dev, stream=stream, guided_choice=["yes", "no"], guided_decoding_backend="auto"
        )
        assert "x-ember-ignored-fields" not in reply.headers
        if stream:
            events = parse_sse(reply.content)[:-1]
            text = "".join(
                e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"]
            )
        else:
            text = reply.json()["choices"][0]["message"]["content"]
        assert text in ("yes", "no"), text
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    reply = _chat(
        dev, max_tokens=40, structured_outputs={"json": schema, "whitespace_pattern": " "}
    )
    assert reply.headers["x-ember-ignored-fields"] == "structured_outputs.whitespace_pattern"
    answer = reply.json()["choices"][0]
    if answer["finish_reason"] == "stop":
        assert isinstance(json.loads(answer["message"]["content"])["n"], int)
    else:  # cut short at 40 tokens: still the start of an object with "n"
        assert answer["message"]["content"].startswith("{"), answer


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"guided_grammar": 'root ::= "a"'}, "/guided_grammar"),
        ({"structured_outputs": {"grammar": 'root ::= "a"'}}, "/structured_outputs/grammar"),
        ({"guided_decoding_backend": "xgrammar"}, "/guided_decoding_backend"),
    ],
)
def test_constraints_ember_cannot_enforce_are_a_400_naming_the_field(
    dev: DevServer, fields: dict, field: str
) -> None:
    body = {"model": GLM, "messages": MESSAGES, "max_tokens": 4, **fields}
    reply = httpx.post(f"{dev.url}/ai/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 400, reply.text
    assert field in reply.text
