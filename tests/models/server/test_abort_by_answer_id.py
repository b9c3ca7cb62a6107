"""An OpenAI-route request is aborted by an id its client knows: SGLang's body ``rid`` (the
engine's id, and the answer's, as SGLang answers ``meta_info.id``), or the id its answer
carries (``chatcmpl-<x-request-id>``, whose engine id stays ember's own)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from tests.models.server.live import LiveServer, bad_request, wait_until

LONG = {"max_tokens": 3000, "ignore_eos": True, "temperature": 0}
CHAT = {"messages": [{"role": "user", "content": "hi"}]} | LONG
COMPLETION = {"prompt": "def f("} | LONG


class _Stream(threading.Thread):
    """One streamed OpenAI answer read to its end in a thread; ``ids`` and finish reasons of
    its chunks, ``first`` set once a chunk came."""

    def __init__(self, url: str, body: dict, headers: dict | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.body, self.headers = url, body | {"stream": True}, headers or {}
        self.first = threading.Event()
        self.ids: set[str] = set()
        self.finish: list[str] = []
        self.finished: dict[int, str] = {}  # choice index -> its finish reason
        self.chunks = 0
        self.per_choice: dict[int, int] = {}  # choice index -> chunks that carried it

    def run(self) -> None:
        with httpx.stream(
            "POST", self.url, json=self.body, headers=self.headers, timeout=120
        ) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    self.ids.add(chunk["id"])
                    ends = {c["index"]: c["finish_reason"] for c in chunk["choices"]}
                    ends = {i: reason for i, reason in ends.items() if reason}
                    self.finish += ends.values()
                    self.finished |= ends
                    self.chunks += 1
                    for c in chunk["choices"]:
                        self.per_choice[c["index"]] = self.per_choice.get(c["index"], 0) + 1
                    self.first.set()


def _abort(live: LiveServer, rid: str) -> None:
    answer = httpx.post(live.url + "/abort_request", json={"rid": rid}, timeout=10)
    assert answer.status_code == 200


def _idle(live: LiveServer) -> bool:
    served = live.state.served
    assert served is not None
    return live.engine_stats.running + live.engine_stats.waiting == 0 and not served.answer_ids


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)]
)
def test_a_body_rid_is_the_engine_id_and_the_answer_id(
    kimi: LiveServer, path: str, body: dict
) -> None:
    stream = _Stream(kimi.url + path, body | {"rid": "sgl-rid-1"})
    stream.start()
    assert stream.first.wait(60)
    _abort(kimi, "sgl-rid-1")
    stream.join(60)
    assert not stream.is_alive()
    assert stream.ids == {"sgl-rid-1"}
    assert stream.finish == ["abort"]
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


def test_a_rid_in_use_is_refused(kimi: LiveServer) -> None:
    stream = _Stream(kimi.url + "/v1/chat/completions", CHAT | {"rid": "taken"})
    stream.start()
    assert stream.first.wait(60)
    for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
        error = bad_request(httpx.post(kimi.url + path, json=body | {"rid": "taken"}, timeout=60))
        assert error["param"] == "rid" and "in use" in error["message"], error
    _abort(kimi, "taken")
    stream.join(60)
    assert stream.finish == ["abort"]
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


@pytest.mark.parametrize(
    ("path", "body", "prefix"),
    [("/v1/chat/completions", CHAT, "chatcmpl-"), ("/v1/completions", COMPLETION, "cmpl-")],
)
def test_the_streamed_id_aborts_a_request_named_by_x_request_id(
    kimi: LiveServer, path: str, body: dict, prefix: str
) -> None:
    stream = _Stream(kimi.url + path, body, {"x-request-id": "gw-123"})
    stream.start()
    assert stream.first.wait(60)
    assert stream.ids == {prefix + "gw-123"}
    _abort(kimi, "gw-123")  # the bare header is no id of the request
    _abort(kimi, prefix + "gw-12")  # nor a prefix of its answer's
    seen = stream.chunks
    wait_until(lambda: stream.chunks > seen + 3 or not stream.is_alive(), "more chunks")
    assert stream.is_alive() and not stream.finish
    _abort(kimi, prefix + "gw-123")
    stream.join(60)
    assert not stream.is_alive()
    assert stream.finish == ["abort"]
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


def test_an_abort_of_the_rid_ends_every_choice(kimi: LiveServer) -> None:
    """``n`` choices: the first chunk comes as choice 1 goes into the engine; the abort that
    follows must end it too, even when it lands before choice 1 was submitted (the engine
    drops an abort of an id it does not hold: the race this pins, seen on the first try)."""
    for attempt in range(6):
        rid = f"sgl-n-{attempt}"
        stream = _Stream(kimi.url + "/v1/chat/completions", CHAT | {"rid": rid, "n": 2})
        stream.start()
        assert stream.first.wait(60)
        _abort(kimi, rid)
        stream.join(60)
        assert not stream.is_alive()
        assert sorted(stream.finish) == ["abort", "abort"], (attempt, stream.finish)
        wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", CHAT | {"n": 3}),
        ("/v1/completions", COMPLETION | {"n": 3}),
        ("/generate", {"text": "def f(", "sampling_params": {"n": 3, "max_new_tokens": 20}}),
    ],
)
def test_a_rid_whose_choice_ids_are_in_use_is_refused_up_front(
    kimi: LiveServer, path: str, body: dict
) -> None:
    """Choice ``i`` runs as ``<rid>-<i>``: a request whose choice id another request holds is
    refused before anything runs (not after its first choice streamed)."""
    holder = _Stream(kimi.url + "/v1/chat/completions", CHAT | {"rid": "y-2"})
    holder.start()
    try:
        assert holder.first.wait(60)
        answer = httpx.post(kimi.url + path, json=body | {"rid": "y", "stream": True}, timeout=60)
        error = bad_request(answer)
        assert error["param"] == "rid" and "'y-2'" in error["message"], error
    finally:
        _abort(kimi, "y-2")
    holder.join(60)
    assert holder.finish == ["abort"]
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


@pytest.mark.parametrize(
    ("path", "body", "prefix"),
    [("/v1/chat/completions", CHAT, "chatcmpl-"), ("/v1/completions", COMPLETION, "cmpl-")],
)
def test_a_choice_id_under_x_request_id_ends_that_choice(
    kimi: LiveServer, path: str, body: dict, prefix: str
) -> None:
    """``<answer id>-<i>`` ends choice ``i`` alone, as ``<rid>-<i>`` does; the answer id then
    ends the rest."""
    stream = _Stream(kimi.url + path, body | {"n": 3}, {"x-request-id": "gw-n"})
    stream.start()
    assert stream.first.wait(60)
    _abort(kimi, prefix + "gw-n-2")
    wait_until(lambda: 2 in stream.finished or not stream.is_alive(), "choice 2 to end")
    assert stream.finished == {2: "abort"}, stream.finished
    _abort(kimi, prefix + "gw-n")
    stream.join(60)
    assert stream.finished == {0: "abort", 1: "abort", 2: "abort"}
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


class _GenerateStream(threading.Thread):
    """One streamed ``/generate`` answer read to its end in a thread: each choice's
    ``meta_info.id`` and finish reason."""

    def __init__(self, url: str, body: dict) -> None:
        super().__init__(daemon=True)
        self.url, self.body = url, body | {"stream": True}
        self.first = threading.Event()
        self.ids: dict[int, str] = {}
        self.finished: dict[int, str] = {}

    def run(self) -> None:
        with httpx.stream("POST", self.url + "/generate", json=self.body, timeout=120) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: {"):
                    data = json.loads(line[6:])
                    index, meta = data.get("index", 0), data["meta_info"]
                    self.ids[index] = meta["id"]
                    if meta["finish_reason"]:
                        self.finished[index] = meta["finish_reason"]["type"]
                    self.first.set()


GENERATE_LONG = {"max_new_tokens": 3000, "ignore_eos": True, "temperature": 0}


def test_sglangs_child_ids_name_each_choice_of_generate(kimi: LiveServer) -> None:
    """SGLang names choice ``i`` of rid ``R`` ``R_i`` (``_normalize_rid``), reports it in
    ``meta_info.id`` and aborts it by it; review31 saw ``R_1`` answered 200 and choice 1 run
    on. ember's own ``R-1`` and ``R`` still work."""
    body = {"text": "def f(", "rid": "gen-r", "sampling_params": GENERATE_LONG | {"n": 3}}
    stream = _GenerateStream(kimi.url, body)
    stream.start()
    assert stream.first.wait(60)
    _abort(kimi, "gen-r_1")
    wait_until(lambda: 1 in stream.finished or not stream.is_alive(), "choice 1 to end")
    assert stream.finished == {1: "abort"}, stream.finished
    _abort(kimi, "gen-r-2")  # ember's name for choice 2
    wait_until(lambda: 2 in stream.finished or not stream.is_alive(), "choice 2 to end")
    assert stream.finished == {1: "abort", 2: "abort"}, stream.finished
    _abort(kimi, "gen-r_0")  # choice 0 alone, by SGLang's name for it
    stream.join(60)
    assert not stream.is_alive()
    assert stream.finished == {0: "abort", 1: "abort", 2: "abort"}
    assert stream.ids == {0: "gen-r_0", 1: "gen-r_1", 2: "gen-r_2"}
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


def test_sglangs_child_ids_name_each_choice_of_a_chat(kimi: LiveServer) -> None:
    stream = _Stream(kimi.url + "/v1/chat/completions", CHAT | {"rid": "chat-r", "n": 2})
    stream.start()
    assert stream.first.wait(60)
    _abort(kimi, "chat-r_0")
    wait_until(lambda: 0 in stream.finished or not stream.is_alive(), "choice 0 to end")
    # Choice 1 goes on after choice 0 ended (its end would come in the same write, or later).
    seen = stream.per_choice.get(1, 0)
    wait_until(
        lambda: stream.per_choice.get(1, 0) > seen + 1 or 1 in stream.finished,
        "choice 1 to go on or end",
    )
    assert stream.finished == {0: "abort"}, stream.finished
    _abort(kimi, "chat-r")
    stream.join(60)
    assert stream.finished == {0: "abort", 1: "abort"}
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


@pytest.mark.parametrize(
    ("held", "asked", "taken"),
    [
        ({"rid": "x", "n": 2}, {"rid": "x_1"}, "x_1"),  # a rid that is a live choice's name
        ({"rid": "z_1"}, {"rid": "z", "n": 2}, "z_1"),  # a choice whose name is a live rid
        ({"rid": "w_0"}, {"rid": "w", "n": 3}, "w_0"),
    ],
)
def test_a_rid_colliding_with_sglangs_choice_names_is_refused(
    kimi: LiveServer, held: dict, asked: dict, taken: str
) -> None:
    """One abort would end both requests: the second is refused up front, as a taken rid is."""
    holder = _Stream(kimi.url + "/v1/chat/completions", CHAT | held)
    holder.start()
    try:
        assert holder.first.wait(60)
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
            answer = httpx.post(kimi.url + path, json=body | asked | {"stream": True}, timeout=60)
            error = bad_request(answer)
            assert error["param"] == "rid" and f"{taken!r} is in use" in error["message"], error
        sampling = {"max_new_tokens": 4} | ({"n": asked["n"]} if "n" in asked else {})
        generate = {"text": "def f(", "rid": asked["rid"], "sampling_params": sampling}
        error = bad_request(httpx.post(kimi.url + "/generate", json=generate, timeout=60))
        assert error["param"] == "rid" and f"{taken!r} is in use" in error["message"], error
    finally:
        _abort(kimi, held["rid"])
    holder.join(60)
    assert set(holder.finished.values()) == {"abort"}
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")


@pytest.mark.parametrize(
    ("path", "body", "prefix"),
    [("/v1/chat/completions", CHAT, "chatcmpl-"), ("/v1/completions", COMPLETION, "cmpl-")],
)
def test_a_rid_equal_to_a_live_answers_id_is_refused(
    kimi: LiveServer, path: str, body: dict, prefix: str
) -> None:
    """review31: ``rid: chatcmpl-<x-request-id>`` of a live answer was taken, and one abort of
    that id then ended both requests."""
    holder = _Stream(kimi.url + path, body, {"x-request-id": "gw-live"})
    holder.start()
    try:
        assert holder.first.wait(60)
        rid = prefix + "gw-live"
        for other, other_body in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
            answer = httpx.post(kimi.url + other, json=other_body | {"rid": rid}, timeout=60)
            error = bad_request(answer)
            assert error["param"] == "rid" and "in use" in error["message"], error
        generate = {"text": "x", "rid": rid, "sampling_params": {"max_new_tokens": 2}}
        error = bad_request(httpx.post(kimi.url + "/generate", json=generate, timeout=60))
        assert error["param"] == "rid" and "in use" in error["message"], error
    finally:
        _abort(kimi, prefix + "gw-live")
    holder.join(60)
    assert holder.finish == ["abort"]
    wait_until(lambda: _idle(kimi), "the engine idle, no answer ids held")
