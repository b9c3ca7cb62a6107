"""A client that goes away aborts its request in the engine: running count drops, pages free."""

from __future__ import annotations

import asyncio
import socket

import httpx

from ember.models.server.metrics import parse_prometheus
from tests.models.server.live import LiveServer, wait_until

LONG = {"max_new_tokens": 3000, "ignore_eos": True, "temperature": 0}


def _aborted(live: LiveServer) -> float:
    metrics = parse_prometheus(httpx.get(live.url + "/metrics").text)
    return metrics['sglang:num_aborted_requests_total{model_name="kimi"}']


def test_closing_a_stream_aborts_the_request(kimi: LiveServer) -> None:
    aborted = _aborted(kimi)
    body = {"input_ids": [1, 2, 3, 4], "sampling_params": LONG, "stream": True}
    with httpx.stream("POST", kimi.url + "/generate", json=body, timeout=60) as response:
        lines = response.iter_lines()
        while not next(lines).startswith("data:"):
            pass
        assert kimi.engine_stats.running == 1
    # The connection is closed: the engine drops the request long before 3000 tokens.
    wait_until(lambda: kimi.engine_stats.running == 0, "the engine to drop the request")
    assert kimi.engine_stats.pages_used == 0
    assert kimi.engine_stats.generation_tokens < 3000
    wait_until(lambda: _aborted(kimi) == aborted + 1, "the abort to be counted")


def test_closing_a_non_streaming_request_aborts_it(kimi: LiveServer) -> None:
    aborted = _aborted(kimi)
    generated = kimi.engine_stats.generation_tokens
    host, port = kimi.url.removeprefix("http://").split(":")
    payload = (
        b'{"model": "kimi", "prompt": "x", "max_tokens": 3000, "ignore_eos": true, '
        b'"temperature": 0}'
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        wait_until(lambda: kimi.engine_stats.running == 1, "the request to start")
    wait_until(lambda: kimi.engine_stats.running == 0, "the engine to drop the request")
    assert kimi.engine_stats.generation_tokens - generated < 3000
    wait_until(lambda: _aborted(kimi) == aborted + 1, "the abort to be counted")


def test_a_cancelled_openai_style_stream_frees_its_slot(kimi: LiveServer) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(base_url=kimi.url, timeout=60) as client:
            body = {
                "model": "kimi",
                "messages": [{"role": "user", "content": "go"}],
                "max_tokens": 3000,
                "ignore_eos": True,
                "stream": True,
            }
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                count = 0
                async for line in response.aiter_lines():
                    count += line.startswith("data:")
                    if count == 3:
                        break

    asyncio.run(main())
    wait_until(lambda: kimi.engine_stats.running == 0, "the engine to drop the request")
