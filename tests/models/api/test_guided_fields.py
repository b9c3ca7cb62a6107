"""vLLM's guided_* / structured_outputs.* and SGLang's ebnf on chat and completions: mapped onto
the regex and JSON constraints ember enforces, or refused by name; never silently ignored."""

from __future__ import annotations

import re

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.completion_request import parse_completion_request
from ember.models.api.constraints import constraint_for
from ember.models.api.errors import InvalidRequestField
from ember.models.api.guided_fields import choice_regex
from ember.models.constrain.regex_nfa import compile_regex
from tests.models.api.chat_bodies import with_fields as chat

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    "fields",
    [
        {"guided_choice": ["yes", "no (maybe)"]},
        {"structured_outputs": {"choice": ["yes", "no (maybe)"]}},
    ],
)
def test_a_choice_becomes_the_regex_of_its_alternatives(fields: dict) -> None:
    request = parse_chat_request(chat(**fields))
    assert request.regex == r"(?:yes|no \(maybe\))"
    assert constraint_for(request, tool_format="glm47", reasoning="off") is not None
    completion = parse_completion_request({"prompt": "a", **fields})
    assert completion.regex == request.regex


def test_choice_regex_matches_exactly_the_alternatives() -> None:
    options = ["a.b", "c|d", "e*", "[x]", "$1 ^ {2}", "back\\slash", "plain"]
    pattern = choice_regex(options, "/guided_choice")
    compile_regex(pattern)  # within ember's subset
    for option in options:
        assert re.fullmatch(pattern, option)
    assert not re.fullmatch(pattern, "aXb") and not re.fullmatch(pattern, "c")


@pytest.mark.parametrize(
    "fields",
    [
        {"guided_json": SCHEMA},
        {
            "guided_json": '{"type": "object", "properties": {"a": {"type": "integer"}}, '
            '"required": ["a"]}'
        },
        {"structured_outputs": {"json": SCHEMA}},
    ],
)
def test_guided_json_is_a_json_schema_format(fields: dict) -> None:
    for request in (
        parse_chat_request(chat(**fields)),
        parse_completion_request({"prompt": "a", **fields}),
    ):
        assert request.response_format.type == "json_schema"
        assert request.response_format.schema == SCHEMA


def test_structured_json_object() -> None:
    request = parse_chat_request(chat(structured_outputs={"json_object": True}))
    assert request.response_format.type == "json_object"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"guided_grammar": "root ::= 'a'"},
            "/guided_grammar",
            "expected no EBNF grammar (not supported; ember enforces regex",
        ),
        ({"ebnf": "root ::= 'a'"}, "/ebnf", "ember enforces regex"),
        (
            {"structured_outputs": {"grammar": "root ::= 'a'"}},
            "/structured_outputs/grammar",
            "guided_choice",
        ),
        ({"structural_tag": "{}"}, "/structural_tag", "expected no structural tag"),
        ({"guided_choice": []}, "/guided_choice", "a non-empty array of strings"),
        ({"guided_choice": ["a", 1]}, "/guided_choice/1", "a string"),
        (
            {"guided_choice": ["a"], "regex": "b"},
            "/guided_choice",
            "one regex (already given at '/regex')",
        ),
        (
            {"guided_json": SCHEMA, "response_format": {"type": "json_object"}},
            "/guided_json",
            "one JSON constraint (already given at '/response_format')",
        ),
        ({"guided_json": "{not json"}, "/guided_json", "a JSON schema"),
        (
            {"guided_json": {"type": "string", "pattern": "(?<=a)"}},
            "/guided_json/pattern",
            "lookbehind",
        ),
    ],
)
def test_what_cannot_be_enforced_is_refused_by_name(fields: dict, field: str, message: str) -> None:
    for parse in (
        lambda: parse_chat_request(chat(**fields)),
        lambda: parse_completion_request({"prompt": "a", **fields}),
    ):
        with pytest.raises(InvalidRequestField) as caught:
            parse()
        assert caught.value.field == field
        assert message in str(caught.value)


@pytest.mark.parametrize("backend", ["xgrammar", "outlines:no-fallback", "", 3])
def test_a_request_level_backend_is_refused_as_vllm_v1_refuses_it(backend: object) -> None:
    # vllm/v1/engine/processor.py: "Request-level structured output backend selection is no
    # longer supported. The request specified 'xgrammar', but vLLM was initialised with 'auto'".
    for parse in (
        lambda: parse_chat_request(chat(guided_json=SCHEMA, guided_decoding_backend=backend)),
        lambda: parse_completion_request({"prompt": "a", "guided_decoding_backend": backend}),
    ):
        with pytest.raises(InvalidRequestField) as caught:
            parse()
        assert caught.value.field == "/guided_decoding_backend"
        assert "'auto'" in str(caught.value)


def test_the_engines_own_backend_auto_is_accepted_and_read() -> None:
    from ember.models.api.read_fields import ReadTracker, ignored_note

    body = ReadTracker(chat(guided_choice=["a"], guided_decoding_backend="auto"))
    assert parse_chat_request(body).regex == "(?:a)"
    assert ignored_note(body) is None
