"""A constrained request's grammar is built off the engine thread, before the request enters
the batch: a real in-process model server whose ``GrammarBuilds`` is given a build function
(the typed seam) that blocks on an event. While it is blocked, other requests decode to the
end; then the waiting request completes with output its schema accepts. A client that leaves,
or an ``/abort_request``, while its grammar is built never reaches the engine; identical
specs are built once."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from ember.models.server.grammar_builds import GrammarBuilds
from ember.models.server.metrics import parse_prometheus
from tests.models.server.live import LiveServer, wait_until
from tests.models.server.test_grammar_builds import Builder

SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"enum": ["red", "green", "blue"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["colour", "n"],
    "additionalProperties": False,
}


def chat_body(schema: dict, **extra: object) -> dict:
    return {
        "model": "glm",
        "messages": [{"role": "user", "content": "Pick a colour."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
        "max_tokens": 256,  # the tiny model pads with all the whitespace a grammar allows
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": False},
        **extra,
    }


@pytest.fixture
def blocked(glm: LiveServer) -> Iterator[tuple[LiveServer, Builder, GrammarBuilds]]:
    """``glm`` with a fresh ``GrammarBuilds`` whose builds wait for ``builder.gate``."""
    served = glm.state.served
    assert served is not None
    builder = Builder(blocked=True)
    builds = GrammarBuilds(served.vocab, build=builder)
    original, served.grammars = served.grammars, builds
    try:
        yield glm, builder, builds
    finally:
        builder.gate.set()
        served.grammars = original
        builds.shutdown()


class Call(threading.Thread):
    """One blocking HTTP call in the background."""

    def __init__(self, url: str, body: dict) -> None:
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.response: httpx.Response | None = None

    def run(self) -> None:
        self.response = httpx.post(self.url, json=self.body, timeout=120)

    def answer(self) -> dict:
        self.join(120)
        assert self.response is not None and self.response.status_code == 200, self.response
        return self.response.json()


def _content(answer: dict) -> object:
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    return json.loads(choice["message"]["content"])


def _aborted(live: LiveServer) -> float:
    metrics = parse_prometheus(httpx.get(live.url + "/metrics").text)
    return metrics['sglang:num_aborted_requests_total{model_name="glm"}']


def test_other_requests_decode_while_a_grammar_builds(blocked) -> None:  # noqa: ANN001
    live, builder, builds = blocked
    constrained = Call(live.url + "/v1/chat/completions", chat_body(SCHEMA))
    constrained.start()
    assert builder.entered.wait(60)
    plain = {"text": "def f(", "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
    answer = httpx.post(live.url + "/generate", json=plain, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["meta_info"]["completion_tokens"] == 12
    # The plain request ran to the end while the build was (and still is) blocked.
    assert not builder.gate.is_set() and constrained.is_alive() and builds.pending == 1
    builder.gate.set()
    jsonschema.validate(_content(constrained.answer()), SCHEMA)
    assert builder.started and len(builder.started) == 1


def test_identical_concurrent_specs_are_built_once(blocked) -> None:  # noqa: ANN001
    live, builder, builds = blocked
    calls = [Call(live.url + "/v1/chat/completions", chat_body(SCHEMA, seed=i)) for i in range(4)]
    for call in calls:
        call.start()
    wait_until(lambda: builds.waiting == 4, "every request to wait for the one build")
    builder.gate.set()
    for call in calls:
        jsonschema.validate(_content(call.answer()), SCHEMA)
    assert len(builder.started) == 1


def test_a_client_leaving_while_its_grammar_builds_never_reaches_the_engine(blocked) -> None:  # noqa: ANN001
    live, builder, builds = blocked
    stats = live.engine_stats
    aborted, generated = _aborted(live), stats.generation_tokens
    side = {"enum": ["left", "right"]}
    body = chat_body(side, stream=True)
    with httpx.stream("POST", live.url + "/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()  # kept: dropping the iterator closes the connection
        next(lines)  # the stream has started: its role chunk
        assert builder.entered.wait(60)
        # The build may start on its thread before the event loop registers the wait.
        wait_until(lambda: builds.waiting == 1, "the request to wait for its grammar")
    # The connection is closed: the wait ends, the build goes on (nobody else to stop it).
    wait_until(lambda: builds.waiting == 0, "the request to stop waiting")
    wait_until(lambda: _aborted(live) == aborted + 1, "the abort to be counted")
    builder.gate.set()
    wait_until(lambda: builds.pending == 0, "the build to finish")
    plain = {"text": "x = ", "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}}
    assert httpx.post(live.url + "/generate", json=plain, timeout=60).status_code == 200
    assert stats.generation_tokens - generated == 5, "only the plain request decoded"
    assert stats.running == 0 and stats.waiting == 0
    # Built all the same, and cached: the same request now goes straight on.
    again = httpx.post(live.url + "/v1/chat/completions", json=chat_body(side), timeout=60)
    assert _content(again.json()) in ("left", "right")
    assert len(builder.started) == 1


def test_abort_request_ends_a_request_waiting_for_its_grammar(blocked) -> None:  # noqa: ANN001
    live, builder, builds = blocked
    generated = live.engine_stats.generation_tokens
    body = {
        "text": "x",
        "rid": "waits-for-grammar",
        "sampling_params": {"json_schema": json.dumps(SCHEMA), "max_new_tokens": 32},
    }
    call = Call(live.url + "/generate", body)
    call.start()
    wait_until(lambda: builds.waiting == 1, "the request to wait for its grammar")
    answer = httpx.post(live.url + "/abort_request", json={"rid": "waits-for-grammar"}, timeout=10)
    assert answer.status_code == 200
    meta = call.answer()["meta_info"]
    assert meta["finish_reason"]["type"] == "abort" and meta["completion_tokens"] == 0
    assert live.engine_stats.generation_tokens == generated
    builder.gate.set()
    wait_until(lambda: builds.pending == 0, "the build to finish")
