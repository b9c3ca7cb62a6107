"""SGLang's own surface of ``ember models serve``: ``/generate``, ``/metrics``, ``/server_info``,
as SGLang's clients, dashboards and ``bench_serving`` read them."""

from __future__ import annotations

import httpx
import pytest

from ember.models.server.metrics import TokenRate, parse_prometheus
from tests.models.server.live import LiveServer, bad_request

PROMPT = "def f("


def test_generate_takes_up_to_16_stop_strings(kimi: LiveServer) -> None:
    """/generate's parser allows 16 stop strings; the engine used to refuse more than 4."""
    stops = [f"never-{i}" for i in range(5)] + [","]
    answer = httpx.post(
        kimi.url + "/generate",
        json={"text": "0, 0, 0", "sampling_params": {"max_new_tokens": 40, "stop": stops}},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    stops17 = [f"s{i}" for i in range(17)]
    error = bad_request(
        httpx.post(
            kimi.url + "/generate",
            json={"text": "a", "sampling_params": {"stop": stops17}},
            timeout=60,
        )
    )
    assert error["param"] == "sampling_params.stop"


def test_generate_returns_the_top_logprobs_it_was_asked_for(kimi: LiveServer) -> None:
    """SGLang answers ``top_logprobs_num`` with ``meta_info.output_top_logprobs``; ember used to
    accept the field and leave the list out."""
    body = {
        "text": PROMPT,
        "sampling_params": {"max_new_tokens": 3, "temperature": 0},
        "return_logprob": True,
        "top_logprobs_num": 2,
    }
    meta = httpx.post(kimi.url + "/generate", json=body, timeout=60).json()["meta_info"]
    tops = meta["output_top_logprobs"]
    assert len(tops) == len(meta["output_token_logprobs"]) == 3
    for chosen, top in zip(meta["output_token_logprobs"], tops, strict=True):
        assert len(top) == 2 and top[0][0] >= top[1][0]
        assert top[0][:2] == pytest.approx(chosen[:2])  # greedy: the chosen is the likeliest
    streamed = httpx.post(kimi.url + "/generate", json={**body, "stream": True}, timeout=60)
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    last = httpx.Response(200, content=events[-2]).json()["meta_info"]
    assert last["output_top_logprobs"] == tops
    without = httpx.post(kimi.url + "/generate", json={**body, "top_logprobs_num": 0}, timeout=60)
    assert "output_top_logprobs" not in without.json()["meta_info"]
    # SGLang's entries are (logprob, token id, text): the text null unless asked for.
    assert all(entry[2] is None for entry in meta["output_token_logprobs"] + sum(tops, []))
    texts = {**body, "return_text_in_logprobs": True}
    asked = httpx.post(kimi.url + "/generate", json=texts, timeout=60).json()["meta_info"]
    for entry in asked["output_token_logprobs"] + sum(asked["output_top_logprobs"], []):
        assert isinstance(entry[2], str)


def test_metrics_have_the_names_sglang_dashboards_and_routers_read(kimi: LiveServer) -> None:
    """SGLang's /metrics has sglang:num_used_tokens, sglang:gen_throughput and the
    sglang:time_per_output_token_seconds histogram (its Grafana dashboard and routers read
    them); ember had none of the three."""
    body = {"input_ids": [9, 8, 7], "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}}
    before = parse_prometheus(httpx.get(kimi.url + "/metrics").text)
    assert httpx.post(kimi.url + "/generate", json=body, timeout=60).status_code == 200
    after = parse_prometheus(httpx.get(kimi.url + "/metrics").text)
    label = '{model_name="kimi"}'
    tpot = f"sglang:time_per_output_token_seconds_count{label}"
    assert after[tpot] == before[tpot] + 1
    assert after[f"sglang:gen_throughput{label}"] >= 0.0
    used = after[f"sglang:num_used_tokens{label}"]
    capacity = after[f"ember:kv_capacity_tokens{label}"]
    assert used == pytest.approx(after[f"sglang:token_usage{label}"] * capacity)


def test_gen_throughput_is_the_recent_token_rate() -> None:
    rate = TokenRate(window=10.0)
    assert rate.rate(100.0) == 0.0
    rate.add(100.0, 4)
    assert rate.rate(100.0) == 4.0  # one burst: over at least one second
    rate.add(102.0, 6)
    assert rate.rate(104.0) == 10 / 4
    assert rate.rate(111.0) == 6 / 9  # the first event has left the window
    assert rate.rate(200.0) == 0.0  # idle: nothing in the window


@pytest.mark.parametrize(
    "prompt", [{"text": [PROMPT]}, {"input_ids": [[1, 2, 3]]}], ids=["text", "input_ids"]
)
def test_a_batch_of_one_is_answered_with_a_list(kimi: LiveServer, prompt: dict) -> None:
    """SGLang answers a batch (``text`` or ``input_ids`` as a list of prompts) with a list of
    answers, a batch of one included; ember answered a single object, so a client reading
    ``response.json()[0]`` failed."""
    sampling = {"sampling_params": {"max_new_tokens": 2, "temperature": 0}}
    batch = httpx.post(kimi.url + "/generate", json={**prompt, **sampling}, timeout=60).json()
    assert isinstance(batch, list) and len(batch) == 1
    single = {key: value[0] for key, value in prompt.items()}
    alone = httpx.post(kimi.url + "/generate", json={**single, **sampling}, timeout=60).json()
    assert isinstance(alone, dict) and batch[0]["output_ids"] == alone["output_ids"]


def test_server_info_has_sglangs_internal_states(kimi: LiveServer) -> None:
    """sglang.bench_serving --backend sglang ends every run with
    ``get_server_info()["internal_states"][0].get("avg_spec_accept_length")`` (some versions
    without a check): without the list, the benchmark crashed after running."""
    for path in ("/get_server_info", "/server_info"):
        info = httpx.get(kimi.url + path, timeout=60).json()
        (state,) = info["internal_states"]
        assert state.get("avg_spec_accept_length") is None  # no speculative decoding
        assert state["last_gen_throughput"] >= 0.0


def test_a_rid_sent_again_after_a_hang_up_gets_its_own_grammar_from_the_start(
    kimi: LiveServer,
) -> None:
    """review23: a client hangs up on a JSON-schema /generate stream and sends the same ``rid``
    again at once (a retry), while other requests keep the engine stepping. The ended request
    stays in the engine until its next step, and grammars are kept by rid: the new one's was
    registered before it waited, so the old request advanced it and the answer began mid-object
    (21 of 30). The new request waits for the old one first. (Until the server has seen the
    hang-up the id is in use, a 400: the client retries, as a client would.)"""
    import asyncio
    import json

    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})

    async def main() -> list[str]:
        async with httpx.AsyncClient(base_url=kimi.url, timeout=120) as client:

            async def background() -> None:
                long = {"max_new_tokens": 4000, "ignore_eos": True}
                body = {"input_ids": [5, 6, 7], "stream": True, "sampling_params": long}
                async with client.stream("POST", "/generate", json=body) as answer:
                    async for _ in answer.aiter_lines():
                        pass

            others = [asyncio.ensure_future(background()) for _ in range(2)]
            params = {"max_new_tokens": 24, "json_schema": schema}
            body = {"input_ids": list(range(1, 40)), "rid": "x", "sampling_params": params}
            starts = []
            for _ in range(8):
                streamed = {**body, "stream": True}
                async with client.stream("POST", "/generate", json=streamed) as answer:
                    chunks = 0
                    async for line in answer.aiter_lines():
                        chunks += line.startswith("data:")
                        if chunks == 3:
                            break  # the client hangs up
                for _ in range(500):  # retried while the server has not seen the hang-up
                    again = await client.post("/generate", json=body)
                    if "not in use by a request in progress" not in again.text:
                        break
                    await asyncio.sleep(0.002)
                assert again.status_code == 200, again.text
                starts.append(again.json()["text"].lstrip()[:1])
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            return starts

    assert asyncio.run(main()) == ["{"] * 8


def test_openai_routes_take_sglangs_default_model_name(kimi: LiveServer) -> None:
    """SGLang's OpenAI protocol fills a request's ``model`` with "default" when it is left out
    (protocol.py DEFAULT_MODEL_NAME), and its docs' clients send it: ember answered 404."""
    chat = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    answer = httpx.post(kimi.url + "/v1/chat/completions", json=chat, timeout=60)
    assert answer.status_code == 200, answer.text
    completion = {"model": "default", "prompt": PROMPT, "max_tokens": 2}
    answer = httpx.post(kimi.url + "/v1/completions", json=completion, timeout=60)
    assert answer.status_code == 200, answer.text
    other = httpx.post(kimi.url + "/v1/completions", json={**completion, "model": "defaults"})
    assert other.status_code == 404  # any other unknown name stays vLLM's and OpenAI's 404
