"""vLLM's and SGLang's extra request fields through the official ``openai`` client
(``extra_body``), as SGLang / vLLM users send them: enforced (``guided_choice``,
``guided_json``), honoured (``include_stop_str_in_output``, ``separate_reasoning``) or refused
with a 400 naming the field (grammars, ``lora_path``...), never answered as if ignored."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from tests.models.server.live import LiveServer, running_server, server_settings

NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
ASK = [{"role": "user", "content": "Is Python a snake?"}]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
    "required": ["answer", "n"],
    "additionalProperties": False,
}


def _client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_guided_choice_answers_one_of_the_choices(glm: LiveServer) -> None:
    choices = ["yes", "no", "it depends (on context)"]
    for seed in range(3):
        answer = _client(glm).chat.completions.create(
            model="glm",
            messages=ASK,  # type: ignore[arg-type]
            max_tokens=32,
            seed=seed,
            extra_body={"guided_choice": choices, **NO_THINKING},
        )
        assert answer.choices[0].message.content in choices
    for body in ({"guided_choice": choices}, {"structured_outputs": {"choice": choices}}):
        text = _client(glm).completions.create(
            model="glm", prompt="Answer: ", max_tokens=32, seed=1, extra_body=body
        )
        assert text.choices[0].text in choices


def test_guided_json_answers_json_of_the_schema(glm: LiveServer) -> None:
    for extra in ({"guided_json": SCHEMA}, {"structured_outputs": {"json": SCHEMA}}):
        answer = _client(glm).chat.completions.create(
            model="glm",
            messages=ASK,  # type: ignore[arg-type]
            max_tokens=200,
            seed=2,
            extra_body={**extra, **NO_THINKING},
        )
        jsonschema.validate(json.loads(answer.choices[0].message.content or ""), SCHEMA)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"guided_grammar": "root ::= 'yes'"}, "guided_grammar"),
        ({"ebnf": "root ::= 'yes'"}, "ebnf"),
        ({"structured_outputs": {"grammar": "root ::= 'yes'"}}, "structured_outputs.grammar"),
        ({"lora_path": "adapters/x"}, "lora_path"),
        ({"return_hidden_states": True}, "return_hidden_states"),
        ({"stop_regex": "\\d"}, "stop_regex"),
    ],
)
def test_what_cannot_be_honoured_is_a_400_naming_it(
    glm: LiveServer, extra: dict, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _client(glm).chat.completions.create(
            model="glm",
            messages=ASK,
            max_tokens=4,
            extra_body=extra,  # type: ignore[arg-type]
        )
    assert caught.value.body["param"] == param  # type: ignore[index]


def test_generate_refuses_what_it_cannot_honour(glm: LiveServer) -> None:
    for body, param in (
        ({"text": "a", "lora_path": "x"}, "lora_path"),
        ({"text": "a", "return_hidden_states": True}, "return_hidden_states"),
        ({"text": "a", "sampling_params": {"stop_regex": "("}}, "sampling_params.stop_regex"),
    ):
        answer = httpx.post(glm.url + "/generate", json=body, timeout=60)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param


def test_include_stop_str_in_output_keeps_the_stop_string(glm: LiveServer) -> None:
    base = _client(glm).completions.create(
        model="glm", prompt="def add(a, b):", max_tokens=12, temperature=0
    )
    text = base.choices[0].text
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip()
    cut = _client(glm).completions.create(
        model="glm", prompt="def add(a, b):", max_tokens=12, temperature=0, stop=[stop]
    )
    trimmed = cut.choices[0].text
    assert stop not in trimmed
    for extra in ({"include_stop_str_in_output": True}, {"no_stop_trim": True}):
        kept = _client(glm).completions.create(
            model="glm",
            prompt="def add(a, b):",
            max_tokens=12,
            temperature=0,
            stop=[stop],
            extra_body=extra,
        )
        assert kept.choices[0].text == trimmed + stop
        chat_kept = _client(glm).chat.completions.create(
            model="glm",
            messages=ASK,  # type: ignore[arg-type]
            max_tokens=40,
            temperature=0,
            stop=["e"],
            extra_body={**extra, **NO_THINKING},
        )
        assert (chat_kept.choices[0].message.content or "").endswith("e")


def test_separate_reasoning_false_keeps_reasoning_in_content(glm: LiveServer) -> None:
    split = _client(glm).chat.completions.create(
        model="glm",
        messages=ASK,
        max_tokens=24,
        temperature=0,  # type: ignore[arg-type]
    )
    reasoning = split.choices[0].message.reasoning_content  # type: ignore[attr-defined]
    assert reasoning
    whole = _client(glm).chat.completions.create(
        model="glm",
        messages=ASK,  # type: ignore[arg-type]
        max_tokens=24,
        temperature=0,
        extra_body={"separate_reasoning": False},
    )
    message = whole.choices[0].message
    assert getattr(message, "reasoning_content", None) is None
    assert (message.content or "").startswith(reasoning)


def test_fields_the_server_ignores_are_logged(glm_dir: Path) -> None:
    """As vLLM logs "fields were present in the request but ignored": one line per request
    naming them, and none of the fields ember reads."""
    log = io.StringIO()
    with running_server(server_settings(str(glm_dir), served_model_name="g"), log=log) as live:
        _client(live).chat.completions.create(
            model="g",
            messages=ASK,  # type: ignore[arg-type]
            max_tokens=2,
            temperature=0.5,
            extra_body={"echo": True, "spaces_between_special_tokens": 1},
        )
        _client(live).completions.create(
            model="g", prompt="a", max_tokens=2, stop=["x"], extra_body={"priority": 3}
        )
        _client(live).chat.completions.create(model="g", messages=ASK, max_tokens=2)  # type: ignore[arg-type]
    lines = [line for line in log.getvalue().splitlines() if "ignored" in line]
    assert len(lines) == 2, lines
    assert lines[0].endswith(
        "fields present in the request but ignored: echo, spaces_between_special_tokens"
    )
    assert lines[1].endswith("fields present in the request but ignored: priority")


def test_a_large_choice_list_is_served_and_one_past_its_bound_refused(glm: LiveServer) -> None:
    # review43 MEDIUM-2: 5,000 choices of 30 characters worked before the automaton budget and
    # were then refused as "a regular expression"; built as a trie they fit it.
    choices = [f"option {i:05d} " + "abcdefghijklmnop"[: 30 - 13] for i in range(5_000)]
    answer = _client(glm).completions.create(
        model="glm",
        prompt="Pick one: ",
        max_tokens=64,
        seed=3,
        extra_body={"guided_choice": choices},
    )
    assert answer.choices[0].text in choices
    too_many = ["x" * 30] * 5_001 + ["y" * 1_000] * 1_000  # 1,150,030 characters
    with pytest.raises(openai.BadRequestError) as caught:
        _client(glm).completions.create(
            model="glm", prompt="a", max_tokens=4, extra_body={"guided_choice": too_many}
        )
    assert caught.value.body["param"] == "guided_choice"  # type: ignore[index]
    assert "a choice list of at most 50,000 choices and 150,000 characters" in str(caught.value)
