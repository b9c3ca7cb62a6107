"""The context window a server reports is the number of tokens a request can hold: with
``--max-total-tokens`` it is the KV pool's capacity (whole pages of it), the same figure on every
route that reports it and in the startup line, and a request of exactly that many tokens, prompt
plus completion, is served while one more is refused."""

from __future__ import annotations

import io
from pathlib import Path

import httpx

from tests.models.server.live import running_server, server_settings

# Not a whole number of 16-token pages: the pool holds 15 pages, 240 tokens.
MAX_TOTAL_TOKENS = 250
CAPACITY = 240


def _generate(url: str, prompt_tokens: int, max_new_tokens: int) -> httpx.Response:
    body = {
        "input_ids": [7] * prompt_tokens,
        "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True},
    }
    return httpx.post(url + "/generate", json=body, timeout=120)


def test_max_total_tokens_is_the_reported_and_enforced_context(kimi_dir: Path) -> None:
    log = io.StringIO()
    settings = server_settings(
        str(kimi_dir), kv_cache_bytes=None, max_total_tokens=MAX_TOTAL_TOKENS
    )
    with running_server(settings, log=log) as live:
        models = httpx.get(live.url + "/v1/models").json()["data"][0]
        info = httpx.get(live.url + "/get_model_info").json()
        server = httpx.get(live.url + "/server_info").json()
        tokenized = httpx.post(live.url + "/v1/tokenize", json={"prompt": "x"}).json()
        assert models["max_model_len"] == CAPACITY
        assert info["context_length"] == CAPACITY
        assert server["context_length"] == CAPACITY
        assert server["max_total_num_tokens"] == CAPACITY
        assert tokenized["max_model_len"] == CAPACITY
        assert f"{CAPACITY} KV tokens, context {CAPACITY})" in log.getvalue()

        full = _generate(live.url, CAPACITY - 40, 40)
        assert full.status_code == 200, full.text
        meta = full.json()["meta_info"]
        assert meta["prompt_tokens"] + meta["completion_tokens"] == CAPACITY

        over = _generate(live.url, CAPACITY - 1, 2)
        assert over.status_code == 400
        assert over.json()["error"]["code"] == "context_length_exceeded"
        assert f"maximum context length is {CAPACITY} tokens" in over.json()["error"]["message"]
        too_long = _generate(live.url, CAPACITY, 1)
        assert too_long.status_code == 400
