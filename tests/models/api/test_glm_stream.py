"""GLM's tool-call arguments stream string values as they arrive, as vLLM's GLM-4.5/4.7 parser
does (vllm/tool_parsers/glm4_moe_tool_parser.py: "streams string values incrementally as they
arrive"; a value the call ends inside is closed as it stands), where ember sent one whole
``<arg_key>``/``<arg_value>`` pair at a time. The pieces, concatenated, are exactly the arguments
the non-streaming parser builds from the whole text: checked on random outputs and chunkings."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from ember.models.api.deltas import OutputAccumulator, ParsedOutput, ToolCall
from ember.models.api.output_parser import ChatOutputParser, parse_output

TOOLS = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "zip": {"type": "string"},
            "metric": {"type": "boolean"},
            "filters": {"type": "object"},
            "note": {"type": ["string", "null"]},
            " padded ": {"type": "string"},
        },
    },
    "search": {"type": "object", "properties": {"q": {"type": "string"}}},
    "ping": None,
}
KB, KE, VB, VE = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
CB, CE = "<tool_call>", "</tool_call>"


def _ids() -> object:
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def _stream(text: str, sizes: list[int]) -> tuple[list[str], OutputAccumulator]:
    """Feed ``text`` in pieces of ``sizes`` (cycled); the arguments of call 0 after each feed."""
    parser = ChatOutputParser("glm47", tools=TOOLS, id_factory=_ids())  # type: ignore[arg-type]
    total = OutputAccumulator()
    seen, i = [], 0
    for size in itertools.cycle(sizes):
        if i >= len(text):
            break
        total.add(parser.feed(text[i : i + size]))
        seen.append("".join(total.calls.get(0, [])))
        i += size
    total.add(parser.finish())
    return seen, total


def test_a_string_value_streams_before_its_pair_closes() -> None:
    text = f'{CB}search{KB}q{KE}{VB}say "hi"\nto\\me{VE}{CE}'
    seen, total = _stream(text, [1])
    before_close = seen[text.index(VE) - 1]  # everything up to the value's last character
    assert before_close == '{"q":"say \\"hi\\"\\nto\\\\me'
    assert total.result().tool_calls == (
        ToolCall("call_0", "search", '{"q":"say \\"hi\\"\\nto\\\\me"}'),
    )
    # A marker's first characters are held back until they turn out to be text (or not).
    assert seen[text.index(VE) + len("</arg_val") - 1] == before_close


def test_other_values_still_stream_whole() -> None:
    text = f"{CB}get_weather{KB}days{KE}{VB}12{VE}{KB}note{KE}{VB}null{VE}{CE}"
    seen, total = _stream(text, [1])
    assert seen[text.index(VE) - 1] == ""  # "12" could still become 123
    assert '{"days":12' in seen[text.index(VE) + len(VE) - 1]
    # ["string", "null"]: "null" is null, known only when the value is whole
    assert seen[text.rindex(VE) - 1] == '{"days":12'
    assert total.result().tool_calls[0].arguments == '{"days":12,"note":null}'


def test_a_string_value_the_call_ends_inside_is_closed_as_it_stands() -> None:
    # Streamed, its text went out already; so the whole answer keeps it too (vLLM's streaming
    # parser closes it the same way), where the pair used to be dropped.
    text = f"{CB}search{KB}q{KE}{VB}abc{CE}after"
    expected = ParsedOutput("after", None, (ToolCall("call_0", "search", '{"q":"abc"}'),))
    assert parse_output(text, "glm47", tools=TOOLS, id_factory=_ids()) == expected  # type: ignore[arg-type]
    assert _stream(text, [1])[1].result() == expected


_TEXT = ['"', "\\", "\n", "\t", " ", "<", ">", "/", "é", "😀", "a", "Z", "0", "{", "}", "[", "true",
         "null", "12", "</arg", "</arg_value", "</tool", "<arg_key>", "arg_value>", "</arg_key>",
         "\u2028", "\x00"]  # fmt: skip
_KEYS = ["city", "days", "zip", "metric", "filters", "note", " padded ", "q", "extra", " city "]


def _value(rng: random.Random) -> str:
    return "".join(rng.choice(_TEXT) for _ in range(rng.randrange(0, 8)))


def _call(rng: random.Random) -> str:
    name = rng.choice(["get_weather", "search", "ping", "nope"])
    out = CB + name + rng.choice(["", "\n"])
    for _ in range(rng.randrange(0, 4)):
        out += KB + rng.choice(_KEYS) + KE + rng.choice(["", "\n", " ", " x"]) + VB + _value(rng)
        roll = rng.random()
        if roll < 0.85:
            out += VE + rng.choice(["", "\n"])
        elif roll < 0.92:
            break  # the call ends inside the value
        else:
            out += "junk"  # never closed; a later </arg_value> may close it
    return out + (CE if rng.random() < 0.95 else "")


def _output(rng: random.Random) -> str:
    text = rng.choice(["", "Sure. ", "x\n"])
    for _ in range(rng.randrange(1, 4)):
        text += _call(rng) + rng.choice(["", "\n", " and "])
    if rng.random() < 0.3:  # cut by max_tokens
        text = text[: rng.randrange(len(text) + 1)]
    return text


@pytest.mark.parametrize("seed", range(400))
def test_streamed_arguments_add_up_to_the_whole_answer(seed: int) -> None:
    rng = random.Random(seed)
    text = _output(rng)
    whole = parse_output(text, "glm47", tools=TOOLS, id_factory=_ids())  # type: ignore[arg-type]
    for _ in range(4):
        sizes = [rng.choice([1, 1, 2, 3, 5, 11, 40]) for _ in range(rng.randrange(1, 6))]
        parser = ChatOutputParser("glm47", tools=TOOLS, id_factory=_ids())  # type: ignore[arg-type]
        total, i = OutputAccumulator(), 0
        for size in itertools.cycle(sizes):
            if i >= len(text):
                break
            total.add(parser.feed(text[i : i + size]))
            i += size
            for index, pieces in total.calls.items():  # nothing sent is ever taken back
                assert whole.tool_calls[index].arguments.startswith("".join(pieces)), text
        total.add(parser.finish())
        assert total.result() == whole, text
    if text.count(CB) == text.count(CE):  # no call was cut: each is valid JSON
        for call in whole.tool_calls:
            json.loads(call.arguments)
