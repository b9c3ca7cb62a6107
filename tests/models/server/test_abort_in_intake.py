"""An abort that comes while a request is still being taken in (its prompt tokenized in a
worker thread, before anything reached the engine) ends it: the request never runs.

The test holds the request inside the real tokenizer (a hook around ``Tokenizer.encode`` that
signals when the large prompt is reached and waits to be let go) so that the abort is known to
land in that window, whatever the machine's speed."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest

from ember.models.server.prompt_intake import LARGE_PROMPT_BYTES
from ember.models.tokenizer import Tokenizer
from tests.models.server.live import LiveServer, wait_until

# Tokenized off the event loop (prompt_intake.taken_in), truncated to fit the tiny context.
TEXT = "hello world " * (LARGE_PROMPT_BYTES // 12 + 1000)
LONG = {"max_tokens": 200, "ignore_eos": True, "temperature": 0, "truncate_prompt_tokens": 64}


class _IntakeGate:
    """Wraps the real ``Tokenizer.encode`` (the class's: a tokenizer is a frozen dataclass): a
    call on the large prompt sets ``entered`` and waits for ``go`` before it tokenizes."""

    def __init__(self, encode: Callable[..., list[int]]) -> None:
        self.encode = encode
        self.entered = threading.Event()
        self.go = threading.Event()

    def hook(self) -> Callable[..., list[int]]:
        def encode(tokenizer: Tokenizer, text: str, allow_special: bool = True) -> list[int]:
            if len(text) >= LARGE_PROMPT_BYTES:
                self.entered.set()
                assert self.go.wait(60), "the test never let the tokenizer go"
            return self.encode(tokenizer, text, allow_special)

        return encode


def _idle(live: LiveServer) -> bool:
    served = live.state.served
    assert served is not None
    return live.engine_stats.running + live.engine_stats.waiting == 0 and not served.answer_ids


CASES = [
    # (path, body, headers, the abort's body)
    ("/v1/completions", {"prompt": TEXT, "rid": "early-1"}, {}, {"rid": "early-1"}),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": TEXT}], "rid": "early-2", "n": 2},
        {},
        {"rid": "early-2"},
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": TEXT}]},
        {"x-request-id": "gw-early"},
        {"rid": "chatcmpl-gw-early"},
    ),
    ("/v1/completions", {"prompt": TEXT}, {}, {"abort_all": True}),
]


@pytest.mark.parametrize(("path", "body", "headers", "abort"), CASES)
def test_an_abort_during_intake_ends_the_request(
    kimi: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    body: dict,
    headers: dict,
    abort: dict,
) -> None:
    served = kimi.state.served
    assert served is not None
    gate = _IntakeGate(Tokenizer.encode)
    monkeypatch.setattr(Tokenizer, "encode", gate.hook())
    answer: dict = {}

    def call() -> None:
        response = httpx.post(
            kimi.url + path, json={"model": "kimi"} | LONG | body, headers=headers, timeout=120
        )
        answer["status"], answer["json"] = response.status_code, response.json()

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    try:
        assert gate.entered.wait(60), "the request never reached the tokenizer"
        aborted = httpx.post(kimi.url + "/abort_request", json=abort, timeout=10)
        assert aborted.status_code == 200
    finally:
        gate.go.set()
    caller.join(120)
    assert answer["status"] == 200, answer
    choices = answer["json"]["choices"]
    assert [c["finish_reason"] for c in choices] == ["abort"] * len(choices), answer
    assert answer["json"]["usage"]["completion_tokens"] == 0, answer
    wait_until(lambda: _idle(kimi), "the engine idle, no request ids held")
