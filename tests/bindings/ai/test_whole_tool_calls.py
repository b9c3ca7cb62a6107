"""Workers AI's dialect streams each tool call of a family-B model as one complete delta.

The platform's glm-4.7-flash sends a tool call in one ``chat.completion.chunk`` whose delta holds
``index``, ``id``, ``type``, ``function.name`` and the whole ``function.arguments`` string
(reference/workers-api.md section 1.5; workers-ai-provider's fixtures have the same shape), where
a replica streams it OpenAI's way: a first piece with id and name, then argument fragments.
``WholeToolCalls`` joins the pieces in front of the dialect's ``StreamTranslator``; content,
reasoning, the finish chunk, usage and ``[DONE]`` go through as before.
"""

from __future__ import annotations

import json
import random

import pytest

from ember.bindings.ai.dialects import StreamTranslator, reference_translation
from ember.bindings.ai.whole_tool_calls import WholeToolCalls, reference_whole_tool_calls
from ember.models.api.sse import parse_sse
from ember.models.pool.errors import InvalidEvent

M = "@cf/zai-org/glm-4.7-flash"
USAGE = {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}


def chunk(delta: dict, finish: str | None = None, index: int = 0, **extra: object) -> str:
    choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 7, "model": M}
    return json.dumps({**body, "choices": [choice], **extra}, separators=(",", ":"))


def head(index: int, name: str, call_id: str, arguments: str = "", choice: int = 0) -> str:
    call = {"index": index, "id": call_id, "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    return chunk({"tool_calls": [call]}, index=choice)


def piece(index: int, arguments: str, choice: int = 0) -> str:
    return chunk(
        {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}, index=choice
    )


USAGE_CHUNK = json.dumps(
    {"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE}
)


def run(events: list[str]) -> list[object]:
    stream = WholeToolCalls(StreamTranslator("workers", M, rename=False))
    out = b"".join(stream.feed(e) for e in events) + stream.end()
    return parse_sse(out)


def calls_of(events: list[object]) -> list[list[dict]]:
    """The ``tool_calls`` of each event that has some."""
    return [
        c["delta"]["tool_calls"]
        for e in events
        if isinstance(e, dict)
        for c in e.get("choices") or []
        if c["delta"].get("tool_calls")
    ]


def test_a_call_streamed_in_pieces_arrives_as_one_complete_delta() -> None:
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "think"}),
        head(0, "get_weather", "call_1"),
        piece(0, '{"city":'),
        piece(0, '"Par'),
        piece(0, 'is"}'),
        chunk({}, "tool_calls"),
        USAGE_CHUNK,
        "[DONE]",
    ]
    out = run(events)
    (call,) = [c for calls in calls_of(out) for c in calls]
    assert call == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert len(calls_of(out)) == 1
    delivered = [e for e in out if isinstance(e, dict) and e.get("choices")]
    whole = delivered[2]
    assert whole["id"] == "c1" and whole["object"] == "chat.completion.chunk"
    assert whole["choices"][0]["finish_reason"] is None
    assert delivered[3]["choices"][0]["finish_reason"] == "tool_calls"  # after the call
    assert delivered[1]["choices"][0]["delta"] == {"reasoning_content": "think"}  # untouched
    assert out[-2:] == [{"response": "", "usage": USAGE}, "[DONE]"]


def test_two_calls_each_arrive_whole_in_order() -> None:
    events = [
        head(0, "a", "x"),
        piece(0, '{"n":1}'),
        head(1, "b", "y", '{"m"'),
        piece(1, ":2}"),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    calls = calls_of(run(events))
    assert calls == [
        [
            {
                "index": 0,
                "id": "x",
                "type": "function",
                "function": {"name": "a", "arguments": '{"n":1}'},
            }
        ],
        [
            {
                "index": 1,
                "id": "y",
                "type": "function",
                "function": {"name": "b", "arguments": '{"m":2}'},
            }
        ],
    ]


def test_content_after_a_call_closes_it_first() -> None:
    out = run([head(0, "a", "x"), piece(0, "{}"), chunk({"content": "done"}), "[DONE]"])
    kinds = [next(iter(e["choices"][0]["delta"])) for e in out if isinstance(e, dict)]
    assert kinds == ["tool_calls", "content"]


def test_each_choice_keeps_its_own_calls() -> None:
    events = [
        head(0, "a", "x", choice=0),
        head(0, "b", "y", choice=1),
        piece(0, '{"i":0}', choice=0),
        piece(0, '{"i":1}', choice=1),
        chunk({}, "tool_calls", index=1),
        chunk({}, "tool_calls", index=0),
        "[DONE]",
    ]
    out = [e["choices"][0] for e in run(events) if isinstance(e, dict)]
    said = [(c["index"], c["finish_reason"] or c["delta"]["tool_calls"][0]) for c in out]
    assert [(i, s if isinstance(s, str) else s["function"]["arguments"]) for i, s in said] == [
        (1, '{"i":1}'),
        (1, "tool_calls"),
        (0, '{"i":0}'),
        (0, "tool_calls"),
    ]


@pytest.mark.parametrize(
    "ending",
    [[USAGE_CHUNK, "[DONE]"], ["[DONE]"], []],
)
def test_a_stream_that_ends_without_a_finish_still_sends_the_call(ending: list[str]) -> None:
    out = run([head(0, "a", "x"), piece(0, '{"cut'), *ending])
    assert calls_of(out) == [
        [
            {
                "index": 0,
                "id": "x",
                "type": "function",
                "function": {"name": "a", "arguments": '{"cut'},
            }
        ]
    ]
    assert out[-1] == "[DONE]"


@pytest.mark.parametrize("error", [{"error": {"message": "boom"}}, {"errors": [{"code": 3040}]}])
def test_an_error_mid_call_drops_the_cut_call(error: dict) -> None:
    """A call the error cut is not sent as whole (a client may json.loads the first arguments
    it sees); the error event ends the stream as before."""
    out = run([head(0, "a", "x"), piece(0, '{"city": "Par'), json.dumps(error), "[DONE]"])
    assert calls_of(out) == []
    assert any(isinstance(e, dict) and ("errors" in e or "error" in e) for e in out), out


def test_null_fields_beside_the_pieces_stream_nothing() -> None:
    """A server that sends ``"role": null, "content": null`` beside each piece (pydantic's
    shape): no empty chunk per piece, and the pieces' logprobs stay with the call."""
    nulls = {"role": None, "content": None, "reasoning_content": None}
    first = {"index": 0, "id": "x", "type": "function", "function": {"name": "a"}}
    rest = {"index": 0, "function": {"arguments": "{}"}}
    out = run([chunk({**nulls, "tool_calls": [first]}), chunk({**nulls, "tool_calls": [rest]})])
    dicts = [e for e in out if isinstance(e, dict)]
    assert len(dicts) == 1, out
    assert dicts[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_text_in_the_chunk_of_a_piece_streams_at_once() -> None:
    mixed = chunk(
        {"content": "Sure. ", "tool_calls": [{"index": 0, "id": "x", "function": {"name": "a"}}]}
    )
    out = run([mixed, piece(0, "{}"), chunk({}, "stop"), "[DONE]"])
    deltas = [e["choices"][0]["delta"] for e in out if isinstance(e, dict)]
    assert deltas[0] == {"content": "Sure. "}
    assert deltas[1]["tool_calls"][0]["function"] == {"name": "a", "arguments": "{}"}


def test_the_finish_on_the_last_piece_comes_after_the_call() -> None:
    last = chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, "tool_calls")
    out = [e for e in run([head(0, "a", "x", "{"), last, "[DONE]"]) if isinstance(e, dict)]
    assert out[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert out[1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }


def test_logprobs_of_the_pieces_ride_on_the_whole_call() -> None:
    def with_logprobs(data: str, tokens: list[str]) -> str:
        payload = json.loads(data)
        content = [{"token": t, "logprob": -1.0, "bytes": None, "top_logprobs": []} for t in tokens]
        payload["choices"][0]["logprobs"] = {"content": content}
        return json.dumps(payload)

    events = [with_logprobs(head(0, "a", "x"), ["<a>"]), with_logprobs(piece(0, "{}"), ["{", "}"])]
    (whole,) = [e for e in run(events) if isinstance(e, dict)]
    tokens = [t["token"] for t in whole["choices"][0]["logprobs"]["content"]]
    assert tokens == ["<a>", "{", "}"]


def test_chunks_without_calls_pass_through_unparsed_when_none_is_open() -> None:
    spaced = '{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": null}]}'
    stream = WholeToolCalls(StreamTranslator("workers", M, rename=False))
    assert stream.feed(spaced) == b"data: " + spaced.encode() + b"\n\n"


def test_an_unreadable_piece_is_the_replicas_fault() -> None:
    stream = WholeToolCalls(StreamTranslator("workers", M, rename=False))
    with pytest.raises(InvalidEvent):
        stream.feed('{"choices":[{"delta":{"tool_calls":[')


def _random_stream(rng: random.Random) -> list[str]:
    """A replica's stream: content, reasoning and tool calls in pieces for one or two choices,
    sometimes a piece beside text or a finish, compact or spaced JSON."""
    events: list[dict] = []
    open_calls: dict[int, int] = {}
    for _ in range(rng.randint(0, 12)):
        choice = rng.choice([0, 0, 0, 1])
        delta: dict = {}
        roll = rng.random()
        if roll < 0.3:
            delta[rng.choice(["content", "reasoning_content"])] = rng.choice(["a", "", " b"])
        if rng.random() < 0.1:
            delta["role"] = None  # a null field beside the pieces
        if roll > 0.2:
            call = open_calls.get(choice, -1)
            if call < 0 or rng.random() < 0.3:
                call += 1
                open_calls[choice] = call
                first = {"index": call, "id": f"call_{choice}_{call}", "type": "function"}
                first["function"] = {"name": rng.choice(["f", "g"]), "arguments": ""}
                delta["tool_calls"] = [first]
            else:
                piece = {"index": call, "function": {"arguments": rng.choice(['{"', "k", '":1}'])}}
                delta["tool_calls"] = [piece]
        finish = rng.choice([None] * 6 + ["tool_calls", "stop", "length"])
        logprobs = {"content": [{"token": "t", "logprob": -0.5}]} if rng.random() < 0.2 else None
        choices = [{"index": choice, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]
        event: dict = {"id": "c", "object": "chat.completion.chunk", "model": M, "choices": choices}
        if rng.random() < 0.2:
            event["usage"] = None
        events.append(event)
    if rng.random() < 0.5:
        events.append({"object": "chat.completion.chunk", "choices": [], "usage": {"n": 1}})
    if rng.random() < 0.1:
        events.append({"error": {"message": "boom", "code": 3040}})
    separators = rng.choice([(",", ":"), (", ", ": ")])
    encoded = [json.dumps(e, separators=separators) for e in events]
    if rng.random() < 0.8:
        encoded.append("[DONE]")
    return encoded


def test_fast_path_matches_the_reference_on_random_streams() -> None:
    rng = random.Random()
    for _ in range(400):
        events = _random_stream(rng)
        stream = WholeToolCalls(StreamTranslator("workers", M, rename=False))
        fast = b"".join(stream.feed(e) for e in events) + stream.end()
        joined = [
            e if isinstance(e, str) else json.dumps(e) for e in reference_whole_tool_calls(events)
        ]
        expected = reference_translation(joined, "workers", M)
        assert parse_sse(fast) == expected, events
        for calls in calls_of(expected):
            assert all("id" in call and "name" in call["function"] for call in calls), events
