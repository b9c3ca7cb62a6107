"""``/flush_cache``: SGLang's answer, the prefix cache really dropped, and refused while a
request runs (as SGLang's scheduler refuses), or waited for with ``?timeout=``."""

from __future__ import annotations

import json

import httpx

from ember.models.server.metrics import parse_prometheus
from ember.models.server.sglang_routes import FLUSHED_TEXT
from tests.models.server.live import LiveServer

PROMPT = list(range(200, 264))  # 64 tokens: several full pages for the prefix cache


def _cached_tokens(live: LiveServer, prompt: list[int]) -> int:
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    answer = httpx.post(live.url + "/generate", json=body, timeout=60).json()
    return answer["meta_info"]["cached_tokens"]


def _prefix_cache_tokens(live: LiveServer) -> float:
    text = httpx.get(live.url + "/metrics", timeout=30).text
    return parse_prometheus(text)['ember:prefix_cache_tokens{model_name="glm"}']


def test_flush_cache_drops_the_prefix_cache(glm: LiveServer) -> None:
    _cached_tokens(glm, PROMPT)
    assert _cached_tokens(glm, PROMPT) > 0, "the second run should hit the prefix cache"
    assert _prefix_cache_tokens(glm) > 0
    flushed = httpx.post(glm.url + "/flush_cache", timeout=30)
    assert flushed.status_code == 200
    assert flushed.text == FLUSHED_TEXT
    assert flushed.text.startswith("Cache flushed.\n")
    assert _prefix_cache_tokens(glm) == 0
    assert _cached_tokens(glm, PROMPT) == 0, "the flushed prefix must be recomputed"
    assert _cached_tokens(glm, PROMPT) > 0, "and cached again afterwards"
    again = httpx.get(glm.url + "/flush_cache", timeout=30)  # SGLang takes GET as well
    assert again.status_code == 200 and _prefix_cache_tokens(glm) == 0


def test_flush_cache_is_refused_while_a_request_runs(glm: LiveServer) -> None:
    body = {
        "input_ids": PROMPT,
        "stream": True,
        # Far more tokens than the test waits for: the request is running until it is closed.
        "sampling_params": {"max_new_tokens": 1500, "temperature": 0, "ignore_eos": True},
    }
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", glm.url + "/generate", json=body) as stream:
            lines = stream.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert json.loads(first[6:])["meta_info"]["finish_reason"] is None
            refused = client.post(glm.url + "/flush_cache")
            assert refused.status_code == 400
            assert refused.text == (
                "Cache not flushed because there are pending requests. "
                "#queue-req: 0, #running-req: 1\n"
            )
            assert _prefix_cache_tokens(glm) > 0
        # The stream is closed: the request is aborted; a flush that waits sees the engine idle.
        waited = client.post(glm.url + "/flush_cache", params={"timeout": 30})
        assert waited.status_code == 200 and waited.text == FLUSHED_TEXT
        assert _prefix_cache_tokens(glm) == 0
        bad = client.post(glm.url + "/flush_cache", params={"timeout": "soon"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "timeout"
