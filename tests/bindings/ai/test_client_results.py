"""What ``env.AI.run`` hands a handler, at the typed seam between the isolate's client and its
binding channel (``BindingChannel``): a chat.completion answers by key and by attribute, and
reading the classic schema's ``response`` says where the text is."""

from __future__ import annotations

import asyncio
import json

import pytest

from ember.bindings.ai.client import Ai
from ember.bindings.base import BindingSpec, CallReply

COMPLETION = {
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


class AnsweringChannel:
    """A BindingChannel whose service answers every call with ``body``."""

    def __init__(self, body: object) -> None:
        self.body = json.dumps(body).encode()

    async def call(self, binding, method, args, *, upload=None) -> CallReply:  # noqa: ANN001
        head = {"status": 200, "headers": {"content-type": "application/json"}, "body": self.body}
        return CallReply(head)


def _run(body: object) -> object:
    ai = Ai(BindingSpec("ai", "AI", "ember.bindings.ai.client:Ai"), AnsweringChannel(body))
    return asyncio.run(ai.run("@cf/zai-org/glm-4.7-flash", {"prompt": "hi"}))


def test_a_chat_completion_reads_by_key_and_attribute() -> None:
    result = _run(COMPLETION)
    assert result["choices"][0]["message"]["content"] == "hi"
    assert result.choices[0].message.content == "hi"
    assert result.usage.total_tokens == 4 and result.get("response") is None
    assert json.loads(json.dumps(result)) == COMPLETION  # still a plain dict underneath


def test_reading_the_classic_response_key_says_where_the_text_is() -> None:
    result = _run(COMPLETION)
    with pytest.raises(KeyError, match=r"result\['choices'\]\[0\]\['message'\]\['content'\]"):
        result["response"]  # noqa: B018
    with pytest.raises(AttributeError, match="chat.completion"):
        result.response  # noqa: B018
    with pytest.raises(KeyError) as missing:
        result["nothing"]  # noqa: B018
    assert missing.value.args == ("nothing",)


def test_a_classic_answer_keeps_its_response_key() -> None:
    result = _run({"response": "hello", "usage": {"total_tokens": 2}})
    assert result["response"] == result.response == "hello"
