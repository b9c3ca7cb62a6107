"""SGLang's ``/abort_request`` and ``/get_load``, vLLM's ``/load``, ``/version`` and ``/ping``
on a real ``ember models serve`` subprocess serving one request at a time, and the pool's
attach-by-URL client in front of it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import httpx
import pytest

import ember
from ember.models.pool.config import parse_pool_config
from ember.models.pool.pool import ModelPool, RequestOptions
from tests.models.server.live import wait_until

LONG = {"max_new_tokens": 3000, "ignore_eos": True, "temperature": 0}


def _events(lines: Iterator[str]) -> Iterator[dict | str]:
    for line in lines:
        if line.startswith("data: "):
            data = line[len("data: ") :]
            yield data if data == "[DONE]" else json.loads(data)


class _Stream(threading.Thread):
    """One streaming ``/generate`` read to its end in a thread; ``first`` is set once a chunk
    has come."""

    def __init__(self, url: str, rid: str, n: int = 1) -> None:
        super().__init__(daemon=True)
        self.url, self.rid, self.n = url, rid, n
        self.first = threading.Event()
        self.events: list[dict | str] = []

    def run(self) -> None:
        sampling = {**LONG, "n": self.n} if self.n > 1 else LONG
        body = {"text": "def f(", "rid": self.rid, "stream": True, "sampling_params": sampling}
        with httpx.stream("POST", self.url + "/generate", json=body, timeout=120) as answer:
            for event in _events(answer.iter_lines()):
                self.events.append(event)
                self.first.set()

    def last(self) -> dict:
        assert self.events[-1] == "[DONE]", self.events[-3:]
        last = self.events[-2]
        assert isinstance(last, dict)
        return last

    def reasons(self) -> dict[str, str]:
        """Each choice's (``meta_info.id``'s) last finish reason type."""
        out = {}
        for event in self.events:
            if isinstance(event, dict) and event["meta_info"]["finish_reason"] is not None:
                out[event["meta_info"]["id"]] = event["meta_info"]["finish_reason"]["type"]
        return out


def _load(url: str) -> dict:
    answer = httpx.get(url + "/get_load", timeout=10)
    assert answer.status_code == 200, answer.text
    (rank,) = answer.json()  # one entry per data-parallel rank, as SGLang answers
    return rank


def _idle(url: str) -> bool:
    rank = _load(url)
    return rank["num_reqs"] == 0 and rank["num_waiting_reqs"] == 0


def test_abort_request_ends_a_long_generation_as_sglang_ends_it(kimi_process: str) -> None:
    stream = _Stream(kimi_process, "long-one")
    stream.start()
    assert stream.first.wait(60)
    answer = httpx.post(kimi_process + "/abort_request", json={"rid": "long-one"}, timeout=10)
    assert answer.status_code == 200
    stream.join(60)
    assert not stream.is_alive()
    meta = stream.last()["meta_info"]
    assert meta["finish_reason"] == {
        "type": "abort",
        "message": "Aborted",
        "status_code": None,
        "err_type": None,
    }
    assert meta["id"] == "long-one" and 0 < meta["completion_tokens"] < 3000
    wait_until(lambda: _idle(kimi_process), "the engine to let the request go", 30)


@pytest.mark.parametrize("how", ["rid", "abort_all"])
def test_aborting_an_n_choice_request_ends_every_choice(kimi_process: str, how: str) -> None:
    # One request runs at a time: choice 1 waits behind choice 0 while the abort comes.
    stream = _Stream(kimi_process, f"family-{how}", n=2)
    stream.start()
    assert stream.first.wait(60)
    body = {"rid": stream.rid} if how == "rid" else {"abort_all": True}
    answer = httpx.post(kimi_process + "/abort_request", json=body, timeout=10)
    assert answer.status_code == 200
    stream.join(120)
    assert not stream.is_alive()
    assert stream.events[-1] == "[DONE]"
    # meta_info.id of choice i is SGLang's name for it, <rid>_<i>.
    assert stream.reasons() == {f"{stream.rid}_0": "abort", f"{stream.rid}_1": "abort"}
    wait_until(lambda: _idle(kimi_process), "the engine to let both choices go", 30)


def test_aborting_a_waiting_n_choice_request_ends_the_choices_it_never_started(
    kimi_process: str,
) -> None:
    # A running request keeps the n-choice one waiting: its choice 0 is aborted before its
    # prefill, so its other choices never went into the engine.
    blocker = _Stream(kimi_process, "blocker")
    blocker.start()
    assert blocker.first.wait(60)
    family = _Stream(kimi_process, "waiting-family", n=3)
    family.start()
    wait_until(lambda: _load(kimi_process)["num_waiting_reqs"] == 1, "it to wait", 30)
    answer = httpx.post(kimi_process + "/abort_request", json={"rid": family.rid}, timeout=10)
    assert answer.status_code == 200
    family.join(60)
    assert not family.is_alive() and family.events[-1] == "[DONE]"
    rids = [f"{family.rid}_{i}" for i in range(3)]
    assert family.reasons() == dict.fromkeys(rids, "abort")
    httpx.post(kimi_process + "/abort_request", json={"rid": blocker.rid}, timeout=10)
    blocker.join(60)
    wait_until(lambda: _idle(kimi_process), "the engine to empty", 30)


def test_abort_request_ends_a_chat_stream_by_its_id(kimi_process: str) -> None:
    body = {
        "model": "kimi",
        "messages": [{"role": "user", "content": "Count to a thousand."}],
        "max_tokens": 3000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", kimi_process + "/v1/chat/completions", json=body, timeout=60) as a:
        events = _events(a.iter_lines())
        first = next(events)
        assert isinstance(first, dict)
        answer = httpx.post(kimi_process + "/abort_request", json={"rid": first["id"]}, timeout=10)
        assert answer.status_code == 200
        rest = list(events)
    assert rest[-1] == "[DONE]"
    reasons = [c["choices"][0]["finish_reason"] for c in rest[:-1] if c.get("choices")]
    assert reasons[-1] == "abort"
    wait_until(lambda: _idle(kimi_process), "the engine to let the request go", 30)


def test_abort_of_an_unknown_rid_is_a_quiet_200(kimi_process: str) -> None:
    answer = httpx.post(kimi_process + "/abort_request", json={"rid": "nobody"}, timeout=10)
    assert answer.status_code == 200 and answer.content == b""
    bad = httpx.post(kimi_process + "/abort_request", json={"rid": 3}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "rid"


def test_get_load_counts_running_and_waiting_then_abort_all_empties_it(
    kimi_process: str,
) -> None:
    streams = [_Stream(kimi_process, f"load-{i}") for i in range(3)]
    for stream in streams:
        stream.start()
    # One runs (--max-running-requests 1), two wait behind it.
    wait_until(lambda: _load(kimi_process)["num_reqs"] == 3, "three requests in", 30)
    rank = _load(kimi_process)
    assert rank["dp_rank"] == 0 and rank["num_waiting_reqs"] == 2
    assert rank["num_tokens"] > 0 and rank["num_pending_tokens"] > 0
    assert httpx.get(kimi_process + "/load", timeout=10).json() == {"server_load": 3}
    answer = httpx.post(kimi_process + "/abort_request", json={"abort_all": True}, timeout=10)
    assert answer.status_code == 200
    for stream in streams:
        stream.join(60)
        assert stream.last()["meta_info"]["finish_reason"]["type"] == "abort"
    wait_until(lambda: _idle(kimi_process), "the engine to empty", 30)
    rank = _load(kimi_process)
    assert (rank["num_tokens"], rank["num_pending_tokens"]) == (0, 0)
    assert httpx.get(kimi_process + "/load", timeout=10).json() == {"server_load": 0}


def test_version_and_ping(kimi_process: str) -> None:
    assert httpx.get(kimi_process + "/version").json() == {"version": ember.__version__}
    for method in ("GET", "POST"):
        ping = httpx.request(method, kimi_process + "/ping")
        assert ping.status_code == 200
    info = httpx.get(kimi_process + "/get_server_info", timeout=10).json()
    assert info["version"] == ember.__version__


def test_the_pool_attached_by_url_still_serves(kimi_process: str) -> None:
    model = "@cf/moonshotai/kimi-k2.5"
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}

    async def main() -> None:
        config = parse_pool_config({model: {"replicas": [{"url": kimi_process}]}}, {})
        pool = ModelPool(config, progress=lambda line: None)
        try:
            assert await pool.wait_ready(model, 30)
            answer = await pool.post(model, "/v1/chat/completions", body, RequestOptions())
            assert answer.status == 200
            (replica,) = pool.group(model).replicas
            assert replica.served_name == "kimi"
        finally:
            await pool.aclose()

    asyncio.run(main())
