"""A request's choices (n > 1) share the compiled JSON branches GLM's parser types "either"
values by (review33 #2): each choice compiled them again on the event loop, 2-35 ms per
value schema per choice."""

from __future__ import annotations

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.tool_streams import GlmToolStream
from ember.models.server.inputs import chat_input
from tests.models.server.live import LiveServer

EITHER = {"type": ["string", "integer"], "minimum": 0, "maximum": 99}
TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": EITHER}}},
}
CALL = "<tool_call>f<arg_key>a</arg_key><arg_value>{}</arg_value></tool_call>"


def test_the_choices_of_a_request_share_one_compile(glm: LiveServer) -> None:
    served = glm.state.served
    assert served is not None
    body = {
        "model": "glm",
        "n": 3,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [TOOL],
        "chat_template_kwargs": {"enable_thinking": False},
    }
    readers = chat_input(served, parse_chat_request(body), "r").readers
    streams = [reader.parser.tools for reader in readers]
    assert all(isinstance(stream, GlmToolStream) for stream in streams)
    assert len({id(stream.branches) for stream in streams}) == 1  # type: ignore[union-attr]
    # Shared, each choice still types its own values: 42 in range is JSON, 420 stays text.
    answers = []
    for reader, value in zip(readers, ("42", "420", "42"), strict=True):
        out = reader.parser.feed(CALL.format(value))
        out_end = reader.parser.finish()
        pieces = [d.arguments for d in out.tool_calls + out_end.tool_calls if d.arguments]
        answers.append("".join(pieces))
    assert answers == ['{"a":42}', '{"a":"420"}', '{"a":42}']
