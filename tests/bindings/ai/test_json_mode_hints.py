"""The "JSON Mode couldn't be met" hint says what happened and names the one field to change:
thinking used the budget (turn it off), or the JSON itself ran long (raise the limit, bound
the schema). It never tells a caller who already turned thinking off to turn it off."""

from __future__ import annotations

from typing import Any

from ember.bindings.ai.dialects import StreamTranslator
from ember.bindings.ai.json_mode import json_mode_miss
from ember.models.api.sse import parse_sse

SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}


def _answer(content: str | None, reasoning: str | None, finish: str = "length") -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def test_thinking_that_used_the_budget_says_how_to_turn_it_off() -> None:
    inputs = {"max_completion_tokens": 20, "response_format": {"type": "json_object"}}
    miss = json_mode_miss(_answer(None, "Let me think"), inputs)
    assert miss is not None
    assert "still thinking when it reached max_completion_tokens=20" in miss
    assert '"chat_template_kwargs": {"enable_thinking": false}' in miss
    assert "raise max_completion_tokens" in miss


def test_json_that_ran_long_suggests_bounds_not_turning_thinking_off() -> None:
    inputs = {
        "max_completion_tokens": 200,
        "response_format": SCHEMA,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    miss = json_mode_miss(_answer('{"name": "aaaa', None), inputs)
    assert miss is not None
    assert "thinking" not in miss
    assert "before the JSON was complete" in miss
    assert "raise max_completion_tokens" in miss
    assert "maxLength and maxItems" in miss


def test_the_hint_names_the_field_the_caller_used() -> None:
    inputs = {"max_tokens": 40, "response_format": {"type": "json_object"}}
    miss = json_mode_miss(_answer("{", None), inputs)
    assert miss is not None and "raise max_tokens," in miss and "max_tokens=40" in miss
    assert "json_schema with maxLength and maxItems" in miss  # json_object: no schema to bound


def test_with_no_limit_given_the_hint_says_the_default_that_applied() -> None:
    # langchain's Workers AI chat model leaves max_tokens out for glm-4.7-flash on purpose.
    answer = {**_answer('{"a": "bbbb', None), "usage": {"completion_tokens": 256}}
    miss = json_mode_miss(answer, {"response_format": {"type": "json_object"}})
    assert miss is not None
    assert "the default token limit (256 tokens; no max_completion_tokens was given)" in miss


def _chunk(delta: dict, finish: str | None = None) -> str:
    import json

    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"object": "chat.completion.chunk", "model": "m", "choices": [choice]})


def _stream_error(events: list[str], inputs: dict) -> str:
    translator = StreamTranslator("workers", "m", False, inputs)
    out = b"".join(translator.feed(e) for e in events) + translator.end()
    parsed = parse_sse(out)
    return parsed[-2]["errors"][0]["message"]


def test_a_stream_cut_while_thinking_and_one_cut_inside_the_json_differ() -> None:
    inputs = {"max_tokens": 8, "response_format": SCHEMA}
    thinking = [_chunk({"reasoning_content": "hmm"}), _chunk({"reasoning_content": "x"}, "length")]
    assert "still thinking" in _stream_error(thinking, inputs)
    json_long = [_chunk({"content": '{"a'}), _chunk({"content": "bc"}, "length")]
    message = _stream_error(json_long, inputs)
    assert "thinking" not in message and "maxLength" in message
    both = [_chunk({"reasoning_content": "hm"}), _chunk({"content": '{"a'}, "length")]
    message = _stream_error(both, inputs)
    assert "thinking came first" in message and "enable_thinking" in message


def test_thinking_then_json_cut_short_names_all_three_ways_out() -> None:
    inputs = {"max_completion_tokens": 40, "response_format": SCHEMA}
    miss = json_mode_miss(_answer('{"a": "', "Let me think"), inputs)
    assert miss is not None and "thinking came first" in miss
    assert "raise max_completion_tokens" in miss and "enable_thinking" in miss
    assert "maxLength" in miss


def test_the_thinking_note_names_the_limit_the_caller_set() -> None:
    from ember.bindings.ai.thinking import cut_short_note

    glm = "@cf/zai-org/glm-4.7-flash"
    note = cut_short_note(glm, {"max_tokens": 4})
    assert "max_tokens=4" in note and note.endswith("or raise max_tokens")
    assert cut_short_note(glm, {}).endswith("or raise max_completion_tokens")
