"""SGLang's native endpoints, and the served tokens against the model's slow reference."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from ember.models.api.sse import parse_sse
from ember.models.server.metrics import parse_prometheus
from tests.models.server.live import LiveServer, running_server, server_settings


@pytest.fixture(scope="module")
def exact(glm_dir: Path) -> Iterator[LiveServer]:
    """glm4moe-tiny in float32 with a float32 KV cache: the engine must match the reference."""
    settings = server_settings(str(glm_dir), served_model_name="glm", dtype="float32")
    with running_server(settings) as live:
        yield live


def _reference_greedy(live: LiveServer, prompt: list[int], count: int) -> list[int]:
    served = live.state.served
    assert served is not None
    model, ids = served.llm.runner.model, list(prompt)
    with torch.inference_mode():
        for _ in range(count):
            logits = model.reference_forward(torch.tensor([ids]))  # type: ignore[attr-defined]
            ids.append(int(logits[0, -1].argmax()))
    return ids[len(prompt) :]


def test_served_greedy_tokens_equal_the_reference_forward(exact: LiveServer) -> None:
    prompts = [[5, 17, 300, 2048], list(range(100, 140)), [7] * 3]
    for prompt in prompts:
        body = {
            "input_ids": prompt,
            "sampling_params": {"max_new_tokens": 10, "temperature": 0, "ignore_eos": True},
        }
        answer = httpx.post(exact.url + "/generate", json=body, timeout=60).json()
        assert answer["output_ids"] == _reference_greedy(exact, prompt, 10)
        assert answer["meta_info"]["finish_reason"] == {"type": "length", "length": 10}
        assert answer["meta_info"]["prompt_tokens"] == len(prompt)


def test_generate_text_whole_and_streamed(kimi: LiveServer) -> None:
    body = {"text": "import json\n", "sampling_params": {"max_new_tokens": 6, "temperature": 0}}
    whole = httpx.post(kimi.url + "/generate", json=body, timeout=60).json()
    assert len(whole["output_ids"]) == whole["meta_info"]["completion_tokens"]
    raw = httpx.post(kimi.url + "/generate", json=body | {"stream": True}, timeout=60)
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(raw.content)
    assert events[-1] == "[DONE]"
    last = events[-2]
    assert last["text"] == whole["text"] and last["output_ids"] == whole["output_ids"]
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-2])


def test_generate_logprobs_and_stop_token(kimi: LiveServer) -> None:
    first = httpx.post(
        kimi.url + "/generate",
        json={"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3, "temperature": 0}},
        timeout=60,
    ).json()
    stop_at = first["output_ids"][1]
    answer = httpx.post(
        kimi.url + "/generate",
        json={
            "input_ids": [1, 2, 3],
            "return_logprob": True,
            "sampling_params": {
                "max_new_tokens": 3,
                "temperature": 0,
                "stop_token_ids": [stop_at],
            },
        },
        timeout=60,
    ).json()
    meta = answer["meta_info"]
    assert meta["finish_reason"] == {"type": "stop", "matched": stop_at}
    assert answer["output_ids"] == first["output_ids"][:2]
    assert [entry[1] for entry in meta["output_token_logprobs"]] == answer["output_ids"]
    assert all(entry[0] <= 0 for entry in meta["output_token_logprobs"])


def test_model_and_server_info(kimi: LiveServer) -> None:
    info = httpx.get(kimi.url + "/get_model_info").json()
    assert info["is_generation"] and info["architectures"] == ["DeepseekV3ForCausalLM"]
    server = httpx.get(kimi.url + "/server_info").json()
    assert server["kv_cache"]["dtype"] == "fp8_e4m3"
    assert server["max_total_num_tokens"] == server["kv_cache"]["capacity_tokens"] > 0
    assert "api_key" not in server
    full = httpx.get(kimi.url + "/get_server_info").json()
    assert full["served_model_name"] == "kimi"
    assert full["tool_call_parser"] == "kimi_k2", "a value --tool-call-parser takes, as SGLang's"
    assert httpx.get(kimi.url + "/health_generate", timeout=60).status_code == 200


def test_metrics_count_requests_and_tokens(kimi: LiveServer) -> None:
    before = parse_prometheus(httpx.get(kimi.url + "/metrics").text)
    body = {"input_ids": [9, 8, 7], "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}}
    assert httpx.post(kimi.url + "/generate", json=body, timeout=60).status_code == 200
    after = parse_prometheus(httpx.get(kimi.url + "/metrics").text)
    label = '{model_name="kimi"}'
    assert (
        after[f"sglang:num_requests_total{label}"]
        == before[f"sglang:num_requests_total{label}"] + 1
    )
    gained = (
        after[f"sglang:generation_tokens_total{label}"]
        - before[f"sglang:generation_tokens_total{label}"]
    )
    assert gained == 5
    assert after[f"sglang:time_to_first_token_seconds_count{label}"] >= 1
    assert after[f"sglang:num_running_reqs{label}"] == 0
    assert f"ember:kv_integrity_failures_total{label}" in after
    checker = f"ember:kv_integrity_cpu_seconds_total{label}"
    assert after[checker] > before[checker]  # sampled checks stamp every token written
    assert 0.0 <= after[f"sglang:token_usage{label}"] <= 1.0


def test_generate_rejects_a_bad_schema_and_bad_ids(kimi: LiveServer) -> None:
    bad_ids = httpx.post(kimi.url + "/generate", json={"input_ids": [10**9]})
    assert bad_ids.status_code == 400 and "vocabulary" in bad_ids.json()["error"]["message"]
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "nonsense"}}})
    bad_schema = httpx.post(
        kimi.url + "/generate",
        json={"text": "x", "sampling_params": {"json_schema": schema}},
    )
    assert bad_schema.status_code == 400
    assert "json_schema" in bad_schema.json()["error"]["param"]
