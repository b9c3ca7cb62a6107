"""A prompt that cannot fit the context window is refused from its size, before it is tokenized,
on every route that checks the window; a prompt that takes long to tokenize does not stop the
streams the server is sending meanwhile."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from ember.models.chat_encode import marked_text_bytes, render_chat
from tests.models.server.live import LiveServer

SOURCE = Path(re.__file__).read_text(encoding="utf-8")  # ordinary text for these tokenizers


def _text(nbytes: int) -> str:
    """``nbytes`` bytes of Python source (ASCII), repeated from one stdlib module."""
    return (SOURCE * (nbytes // len(SOURCE) + 1))[:nbytes]


def _longest(live: LiveServer) -> int:
    served = live.state.served
    assert served is not None
    return max(len(data) for data in served.tokenizer.token_bytes)


def _context(live: LiveServer) -> int:
    served = live.state.served
    assert served is not None
    return served.context_length


def _rendered_bytes(live: LiveServer, text: str) -> int:
    served = live.state.served
    assert served is not None
    messages = [{"role": "user", "content": text}]
    return marked_text_bytes(render_chat(served.tokenizer, messages))


def _floor(nbytes: int, longest: int) -> int:
    return -(-nbytes // longest)


@pytest.mark.parametrize(
    ("path", "field", "name"),
    [
        ("/v1/chat/completions", "messages", "messages"),
        ("/v1/responses", "messages", "messages"),
        ("/v1/completions", "prompt", "prompt"),
        ("/generate", "text", "text"),
    ],
)
def test_a_prompt_too_long_in_bytes_is_refused_without_tokenizing(
    glm: LiveServer, path: str, field: str, name: str
) -> None:
    context, longest = _context(glm), _longest(glm)
    text = _text(context * longest + 1000)  # at least context + 15 tokens, whatever they are
    if path == "/v1/chat/completions":
        body: dict = {"model": "glm", "messages": [{"role": "user", "content": text}]}
        nbytes = _rendered_bytes(glm, text)
    elif path == "/v1/responses":
        body = {"model": "glm", "input": text}
        nbytes = _rendered_bytes(glm, text)
    elif path == "/v1/completions":
        body = {"model": "glm", "prompt": text, "max_tokens": 1}
        nbytes = len(text)
    else:
        body = {"text": text}
        nbytes = len(text)
    reply = httpx.post(glm.url + path, json=body, timeout=120)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == field
    # "at least" the bound's count: the text was never tokenized (its real count is ~5x more).
    floor = _floor(nbytes, longest)
    assert error["message"].startswith(
        f"This model's maximum context length is {context} tokens. However, your {name} "
        f"resulted in at least {floor} tokens. Please reduce the length of the {name}"
    ), error["message"]
    assert f"no token of this model is longer than {longest} bytes" in error["message"]


@pytest.mark.parametrize(
    ("path", "field"), [("/v1/chat/completions", "max_tokens"), ("/v1/completions", "max_tokens")]
)
def test_room_for_the_asked_output_is_checked_by_size_too(
    glm: LiveServer, path: str, field: str
) -> None:
    # The bound leaves ~300 tokens of room; 1000 are asked for.
    context, longest = _context(glm), _longest(glm)
    text = _text((context - 300) * longest)
    if path == "/v1/completions":
        body: dict = {"model": "glm", "prompt": text, "max_tokens": 1000}
        nbytes, name = len(text), "prompt"
    else:
        body = {"model": "glm", "messages": [{"role": "user", "content": text}], "max_tokens": 1000}
        nbytes, name = _rendered_bytes(glm, text), "messages"
    reply = httpx.post(glm.url + path, json=body, timeout=120)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == field
    floor = _floor(nbytes, longest)
    assert error["message"].startswith(
        f"This model's maximum context length is {context} tokens. However, you requested at "
        f"least {floor + 1000} tokens (at least {floor} in the {name}, 1000 in the completion)."
    ), error["message"]


def test_a_prompt_to_be_truncated_is_not_refused_by_its_size(glm: LiveServer) -> None:
    context, longest = _context(glm), _longest(glm)
    body = {
        "model": "glm",
        "prompt": _text(context * longest + 1000),
        "truncate_prompt_tokens": 32,
        "max_tokens": 1,
    }
    reply = httpx.post(glm.url + "/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["prompt_tokens"] == 32


class _Stream(threading.Thread):
    """A streamed chat answer; records when each SSE chunk arrived."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.arrivals: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = {
            "model": "glm",
            "messages": [{"role": "user", "content": "Write a long Python module."}],
            "max_tokens": 3000,
            "ignore_eos": True,
            "stream": True,
        }
        with httpx.stream("POST", self.url + "/v1/chat/completions", json=body, timeout=300) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    self.arrivals.append(time.perf_counter())
                if self.stop.is_set():
                    return  # closing the connection aborts the request


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/tokenize"])
def test_a_prompt_that_takes_long_to_tokenize_does_not_stop_a_stream(
    glm: LiveServer, path: str
) -> None:
    # Sizing: 95% of the bytes the size bound lets through (the window's tokens times the
    # longest token, 69 bytes here): ~270 KB of source, within the bound's reach so it is
    # tokenized, yet ~80,000 tokens, so the chat request is refused once it is (/tokenize just
    # counts them). Tokenizing it takes ~0.4 s on this machine, some 40 decode steps of the
    # stream (~10 ms each at one torch thread); on the event loop no chunk could leave
    # meanwhile. Chunks keep coming while the big request is sent and read (the first ~20% of
    # the window here), and those held back come right after tokenizing (at the answer), so
    # only the window from 40% to 90% is counted.
    context, longest = _context(glm), _longest(glm)
    text = _text(int((context - 1) * longest * 0.95))
    if path == "/tokenize":
        body: dict = {"model": "glm", "prompt": text}
    else:
        body = {"model": "glm", "messages": [{"role": "user", "content": text}]}
    # A loop blocked while tokenizing misses the window every time; a machine loaded by other
    # work can stall the stream's steps past a short window once, so up to three tries.
    for _ in range(3):
        reply, inside, span = _chunks_during_intake(glm, path, body)
        if path == "/tokenize":
            assert reply.status_code == 200, reply.text
            assert reply.json()["count"] >= context
        else:  # past the window once tokenized: the exact count, not the bound's
            assert reply.status_code == 400, reply.text
            assert "However, your messages resulted in at least" not in reply.text
            assert reply.json()["error"]["code"] == "context_length_exceeded"
        if inside:
            break
    assert inside, f"no chunk in {0.5 * span:.3f} s of the big request's intake, 3 tries"


def _chunks_during_intake(
    glm: LiveServer, path: str, body: dict
) -> tuple[httpx.Response, list[float], float]:
    """The big request's answer, the stream's chunks that came in the middle of its intake
    (from 40% to 90% of it), and how long it took."""
    stream = _Stream(glm.url)
    stream.start()
    try:
        deadline = time.monotonic() + 120
        while len(stream.arrivals) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(stream.arrivals) >= 5, "the stream did not start"
        sent = time.perf_counter()
        reply = httpx.post(glm.url + path, json=body, timeout=120)
        answered = time.perf_counter()
    finally:
        stream.stop.set()
    stream.join(60)
    span = answered - sent
    inside = [t for t in stream.arrivals if sent + 0.4 * span <= t <= answered - 0.1 * span]
    return reply, inside, span


def _patterns(count: int, tag: str) -> dict:
    # About 5,100 units of automaton work a pattern (automata.py): 130 pass the request's
    # 600,000, as do three tools of 40.
    properties = {
        f"p{i}": {"type": "string", "pattern": f"^[0-9a-f]{{1000}}-{tag}-{i}$"}
        for i in range(count)
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


def _schema_heavy(path: str, fresh: str) -> dict:
    """A body of a few KB whose schemas pass the request's automaton budget: ~1 CPU-s of
    compiling before its 400, which on the event loop stopped every stream. ``fresh``: in
    every pattern, so that no schema is one the server compiled before (a known schema is
    charged, not compiled again: a retry would take no time in, and see no chunk)."""
    if path == "/v1/chat/completions":
        tools = [
            {
                "type": "function",
                "function": {"name": f"f{t}", "parameters": _patterns(40, f"{fresh}{t}")},
            }
            for t in range(3)
        ]
        return {"messages": [{"role": "user", "content": "x"}], "tools": tools}
    if path == "/v1/responses":  # the Responses API's flat tools (review35)
        flat = [
            {"type": "function", "name": f"f{t}", "parameters": _patterns(40, f"{fresh}{t}")}
            for t in range(3)
        ]
        return {"input": "x", "tools": flat}
    schema = _patterns(130, fresh)
    if path == "/v1/completions":
        format_ = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
        return {"prompt": "x", "response_format": format_}
    return {"text": "x", "sampling_params": {"json_schema": json.dumps(schema)}}


class _Poller(threading.Thread):
    """``GET /health`` one after another; records when each answer came."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.answered: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                client.get(self.url + "/health")
                self.answered.append(time.perf_counter())


@pytest.mark.parametrize(
    "path", ["/v1/chat/completions", "/v1/completions", "/generate", "/v1/responses"]
)
def test_a_small_request_whose_schemas_take_long_to_compile_leaves_the_loop_answering(
    glm: LiveServer, path: str
) -> None:
    """Compiled on the event loop, a few KB of schemas held it for their whole compile: no
    request was answered meanwhile. Compiled on a worker thread, the loop still answers. (A
    stream's chunks do not keep their pace: the compile is Python holding the GIL, and the
    engine's step thread, which takes it back after every torch call, waits a switch interval
    each time; the request's automaton budget bounds how long: see docs/models.md.)"""
    for _ in range(3):  # a loaded machine may hold the loop once for other reasons
        body = _schema_heavy(path, uuid.uuid4().hex[:8])
        assert len(json.dumps(body)) < 64 * 1024  # taken in on the loop by its size alone
        poller = _Poller(glm.url)
        poller.start()
        try:
            while not poller.answered:
                time.sleep(0.01)
            sent = time.perf_counter()
            reply = httpx.post(glm.url + path, json=body, timeout=120)
            answered = time.perf_counter()
        finally:
            poller.stop.set()
        poller.join(60)
        assert reply.status_code == 400, reply.text
        assert "per request" in reply.text
        span = answered - sent
        inside = [t for t in poller.answered if sent + 0.4 * span <= t <= answered - 0.1 * span]
        if inside:
            break
    assert inside, f"no answer in {0.5 * span:.3f} s of the schema request's intake, 3 tries"
