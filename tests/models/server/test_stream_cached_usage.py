"""``stream_options.continuous_usage_stats`` on a prompt that hits the prefix cache: every chunk,
the first one included, reports the cached tokens the final usage reports. vLLM sends its role
chunk (and its echo) with the first engine result and that result's ``num_cached_tokens``;
ember sent the role chunk and the echoed prompt before the engine had admitted the request,
with ``cached_tokens: 0``. (Echo with logprobs asks for the prompt's logprobs, which the prefix
cache cannot give: that prompt is computed again, nothing cached.)"""

from __future__ import annotations

import httpx
import pytest

from tests.models.server.live import LiveServer

# Past several pages of the KV cache, so that the second request takes them from the prefix cache.
LONG = "def count_words(text):\n    return len(text.split())\n\n" * 8

OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


def _sse(live: LiveServer, path: str, body: dict) -> list[dict]:
    reply = httpx.post(live.url + path, json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [httpx.Response(200, content=item).json() for item in data[:-1]]


def _cached(chunk: dict) -> int:
    return chunk["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}]}),
        ("/v1/completions", {"prompt": LONG}),
        ("/v1/completions", {"prompt": LONG, "echo": True}),
        ("/v1/completions", {"prompt": LONG, "echo": True, "n": 2}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}], "n": 2}),
    ],
    ids=["chat", "completion", "echo", "echo-n2", "chat-n2"],
)
def test_the_first_chunk_reports_the_cached_prompt_tokens(
    kimi: LiveServer, path: str, extra: dict
) -> None:
    body = {"model": "kimi", "max_tokens": 3, "temperature": 0, "stream": True, **extra}
    body["stream_options"] = OPTIONS
    _sse(kimi, path, body)  # fills the prefix cache
    *content, last = _sse(kimi, path, body)
    cached = _cached(last)
    assert cached > 0, "the second request should hit the prefix cache"
    assert [_cached(c) for c in content] == [cached] * len(content)
    first = content[0]  # the role chunk, or the echoed prompt: sent with the first event
    if path == "/v1/chat/completions":
        assert first["choices"][0]["delta"]["role"] == "assistant"
        assert first["usage"]["completion_tokens"] == 0
    elif "echo" in extra:
        assert first["choices"][0]["text"] == LONG
        assert first["usage"]["completion_tokens"] == 0
