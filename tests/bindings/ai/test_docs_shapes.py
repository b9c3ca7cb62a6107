"""The pieces behind test_docs_snippets_dev.py, one by one: keyword arguments as Pyodide passes
them, option notes, gateway logs, LoRA and 5007 wordings, and the answer's shape (no
``matched_stop``, a ``chatcmpl-`` id for a raw prompt)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator

import pytest

from ember.bindings.ai.answer import AIAnswer
from ember.bindings.ai.client import _ABSENT, _pyodide_arguments
from ember.bindings.ai.dialects import StreamTranslator, completion_result, reference_translation
from ember.bindings.ai.failures import LoraUnsupported, failure_of, lora_refusal
from ember.bindings.ai.gateway_logs import GatewayLogs, new_log_id
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.raw_prompt import as_chat_chunk, as_chat_completion
from ember.bindings.ai.unknown_fields import (
    misspelt_prompt,
    unknown_fields_note,
    unknown_options_note,
)
from ember.bindings.ai.unknown_model import no_such_model
from ember.errors import InvalidModelInput
from ember.models.api.sse import parse_sse

M = "@cf/zai-org/glm-4.7-flash"


@pytest.mark.parametrize(
    ("inputs", "options", "kwargs", "expected"),
    [
        (_ABSENT, _ABSENT, {"prompt": "x"}, ({"prompt": "x"}, None)),
        ({"p": 1}, _ABSENT, {"gateway": {"id": "g"}}, ({"p": 1}, {"gateway": {"id": "g"}})),
        ({"prompt": "x"}, {}, {"max_tokens": 1}, ({"prompt": "x"}, {})),  # a 4th argument
        (None, _ABSENT, {"rejectIfBusy": True}, (None, {"rejectIfBusy": True})),
        (_ABSENT, _ABSENT, {}, (None, None)),
    ],
)  # fmt: skip
def test_keywords_are_the_last_positional_argument_as_in_pyodide(
    inputs: object, options: object, kwargs: dict[str, object], expected: tuple[object, object]
) -> None:
    assert _pyodide_arguments(inputs, options, kwargs) == expected


def test_unknown_options_are_listed_and_noted_with_the_nearest_name() -> None:
    options = parse_run_options({"rejectifbusy": True, "stream": True, "reject_if_busy": False}, M)
    assert options.unknown == ("rejectifbusy", "stream")
    note = unknown_options_note(M, options.unknown)
    assert note is not None
    assert "'rejectifbusy' (did you mean 'rejectIfBusy'?)" in note
    assert "'stream' in the options: input fields go in the inputs" in note
    assert unknown_options_note(M, parse_run_options({"rejectIfBusy": True}, M).unknown) is None


def test_options_among_the_inputs_are_told_to_move() -> None:
    inputs = {"prompt": "x", "rejectIfBusy": True, "options": {}, "max_token": 1}
    note = unknown_fields_note(M, inputs)
    assert note is not None
    assert "'rejectIfBusy', 'options' in the inputs" in note and "third argument" in note
    assert "'max_token' (did you mean 'max_tokens'?)" in note


def test_a_misspelt_messages_key_is_named() -> None:
    assert misspelt_prompt({"message": []}) == "'message': did you mean 'messages'?"
    assert misspelt_prompt({"Prompt": "x"}) == "'Prompt': did you mean 'prompt'?"
    assert misspelt_prompt({"messages": [], "message": []}) is None
    assert misspelt_prompt({"input": "x"}) is None


def test_a_missing_option_says_missing() -> None:
    with pytest.raises(InvalidModelInput) as caught:
        parse_run_options({"gateway": {"skipCache": True}}, M)
    assert str(caught.value).endswith("missing") and "NoneType" not in str(caught.value)


def test_a_model_path_without_at_gets_a_hint() -> None:
    failure = no_such_model("cf/zai-org/glm-4.7-flash", [M], True)
    assert failure.code.code == 5007 and f"Did you mean '{M}'?" in failure.description


def test_lora_refusals() -> None:
    plain = lora_refusal(M, "x")
    assert isinstance(plain, LoraUnsupported) and failure_of(plain, M).code.code == 5005
    capable = lora_refusal("@cf/mistral/mistral-7b-instruct-v0.2-lora", "x")
    assert not isinstance(capable, LoraUnsupported)
    failure = failure_of(capable, "@cf/mistral/mistral-7b-instruct-v0.2-lora")
    assert failure.code.code == 5006 and "ember serves no LoRA adapters" in failure.description


def test_log_ids_are_ulids_in_time_order() -> None:
    first, second = new_log_id(1000.0), new_log_id(1000.5)
    assert len(first) == 26 and first < second
    assert set(first) <= set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def test_gateway_logs_are_bounded_scoped_and_patched() -> None:
    logs = GatewayLogs(per_tenant=2)
    ids = []
    for _ in range(3):
        log = logs.start("g", M, {"prompt": "x"}, {"user": 1})
        body = json.dumps({"usage": {"prompt_tokens": 4, "completion_tokens": 2}}).encode()
        answer = logs.answered("t1", log, AIAnswer("r", 200, {}, body), keep=True)
        assert answer.headers["cf-aig-log-id"] == log.id
        ids.append(log.id)
    assert logs.get("t1", "g", ids[0]) is None  # the oldest went first
    kept = logs.get("t1", "g", ids[2])
    assert kept is not None and kept.as_json()["tokens_out"] == 2
    assert logs.get("t2", "g", ids[2]) is None and logs.get("t1", "other", ids[2]) is None
    logs.patch(kept, {"feedback": "-1", "score": 5, "metadata": None})
    assert (kept.feedback, kept.score, kept.metadata) == (-1, 5, {})
    for bad in ({"feedback": 2}, {"score": "high"}, {"rating": 1}, []):
        with pytest.raises(InvalidModelInput):
            logs.patch(kept, bad)
    unkept = logs.start("g", M, {}, {})
    logs.answered("t1", unkept, AIAnswer("r", 200, {}, b"{}"), keep=False)  # collectLog: false
    assert logs.get("t1", "g", unkept.id) is None


def test_matched_stop_is_dropped_from_whole_answers() -> None:
    body = {"model": "x", "choices": [{"index": 0, "matched_stop": 151336, "message": {}}]}
    assert completion_result(body, M) == {"model": M, "choices": [{"index": 0, "message": {}}]}


@pytest.mark.parametrize("dialect", ["workers", "openai"])
def test_matched_stop_is_dropped_from_workers_chunks_fast_and_reference_alike(
    dialect: str,
) -> None:
    """Workers AI has no matched_stop; /ai/v1 (OpenAI's dialect) keeps SGLang's field."""
    rng = random.Random(7)
    for _ in range(50):
        events = []
        for index in range(rng.randint(1, 4)):
            choice: dict[str, object] = {"index": 0, "delta": {"content": f"t{index}"}}
            if rng.random() < 0.5:
                choice["matched_stop"] = rng.choice([None, 2, "</s>"])
                choice["finish_reason"] = "stop"
            events.append(json.dumps({"model": M, "choices": [choice]}))
        events.append("[DONE]")
        translator = StreamTranslator(dialect, M, rename=False)  # type: ignore[arg-type]
        out = b"".join(translator.feed(data) for data in events)
        assert (b"matched_stop" in out) == (
            dialect == "openai" and '"matched_stop"' in "".join(events)
        )
        assert parse_sse(out) == reference_translation(events, dialect, M)  # type: ignore[arg-type]


def test_a_raw_prompt_answer_has_a_chat_completion_id() -> None:
    whole = as_chat_completion({"id": "cmpl-1", "object": "text_completion", "choices": []})
    assert whole["id"] == "chatcmpl-1"  # type: ignore[index]
    chunk = json.loads(as_chat_chunk(json.dumps({"id": "cmpl-2", "object": "text_completion"})))
    assert chunk["id"] == "chatcmpl-2" and chunk["object"] == "chat.completion.chunk"


def test_a_streamed_answer_is_logged_when_it_ends() -> None:
    events = [b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n']
    events.append(b'data: {"response":"","usage":{"prompt_tokens":5,"completion_tokens":1}}\n\n')
    events.append(b"data: [DONE]\n\n")

    async def chunks() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    async def read(answer: AIAnswer) -> bytes:
        assert answer.stream is not None
        return b"".join([chunk async for chunk in answer.stream])

    logs = GatewayLogs()
    log = logs.start("g", M, {"prompt": "x", "stream": True}, {})
    answer = logs.answered("t", log, AIAnswer("r", 200, {}, stream=chunks()), keep=True)
    assert log.tokens_out is None  # not yet: the usage comes last
    assert asyncio.run(read(answer)) == b"".join(events)
    entry = log.as_json()
    assert (entry["tokens_in"], entry["tokens_out"]) == (5, 1)
    assert entry["response_size"] == len(b"".join(events))
    assert entry["response_content_type"] == "text/event-stream"
