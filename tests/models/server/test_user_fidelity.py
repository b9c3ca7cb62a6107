"""What a user of SGLang or vLLM expects of the same request: extensions that are honoured
(``stop_token_ids``), errors that name the field the client sent in each API's own words."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ember.models.server.metrics import TokenRate, parse_prometheus
from tests.models.server.live import LiveServer

PROMPT = "def f("


def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _greedy_ids(live: LiveServer, n: int) -> list[int]:
    answer = httpx.post(
        live.url + "/generate",
        json={"text": PROMPT, "sampling_params": {"max_new_tokens": n, "temperature": 0}},
        timeout=60,
    ).json()
    return answer["output_ids"]


def _error(response: httpx.Response) -> dict:
    assert response.status_code == 400, response.text
    return response.json()["error"]


def test_stop_token_ids_end_a_text_completion(kimi: LiveServer) -> None:
    """vLLM and SGLang take ``stop_token_ids`` on /v1/completions; it used to be ignored."""
    ids = _greedy_ids(kimi, 6)
    stop_id = ids[2]
    first = ids.index(stop_id)  # the stop token's first place in the greedy output
    reply = client(kimi).completions.create(
        model="kimi",
        prompt=PROMPT,
        max_tokens=6,
        temperature=0,
        extra_body={"stop_token_ids": [stop_id]},
    )
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == first + 1


def test_stop_token_ids_end_a_chat_completion(kimi: LiveServer) -> None:
    body = dict(
        model="kimi",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=8,
        temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    whole = client(kimi).chat.completions.create(**body, logprobs=True)
    assert whole.usage.completion_tokens >= 3
    tokens = [t.token for t in whole.choices[0].logprobs.content]
    served = kimi.state.served
    assert served is not None
    stop_id = served.tokenizer.backend.token_to_id(tokens[2])
    assert stop_id is not None
    body["extra_body"] = {**body["extra_body"], "stop_token_ids": [stop_id]}
    reply = client(kimi).chat.completions.create(**body)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == tokens.index(tokens[2]) + 1


def test_stop_token_ids_must_be_token_ids(kimi: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(kimi).completions.create(
            model="kimi", prompt=PROMPT, max_tokens=2, extra_body={"stop_token_ids": ["x"]}
        )
    assert caught.value.param == "stop_token_ids.[0]"


@pytest.mark.parametrize(
    ("path", "body", "param", "words"),
    [
        ("/v1/completions", {"prompt": [5] * 5000}, "prompt", "prompt has 5000 tokens"),
        ("/v1/completions", {"prompt": [10**8]}, "prompt", "outside the vocabulary"),
        ("/v1/completions", {"prompt": [[10**8]]}, "prompt", "outside the vocabulary"),
        ("/generate", {"input_ids": [10**8]}, "input_ids", "outside the vocabulary"),
        ("/generate", {"text": "a" * 20000}, "text", "prompt has"),
        (
            "/generate",
            {"text": "a", "sampling_params": {"max_new_tokens": 10**6}},
            "sampling_params.max_new_tokens",
            "max_new_tokens is 1000000",
        ),
        (
            "/generate",
            {"text": "a", "sampling_params": {"max_new_tokens": -1}},
            "sampling_params.max_new_tokens",
            ">= 0",
        ),
        (
            "/generate",
            {"text": "a", "sampling_params": {"temperature": -0.5}},
            "sampling_params.temperature",
            ">= 0",
        ),
        (
            "/generate",
            {"text": "a", "sampling_params": {"max_new_tokens": 2, "min_new_tokens": 5}},
            "sampling_params.min_new_tokens",
            "max_new_tokens",
        ),
        (
            "/generate",
            {"text": "a", "sampling_params": {"seed": 2**70}},
            "sampling_params.seed",
            "",
        ),
        (
            "/generate",
            {"text": "a", "sampling_params": {"json_schema": "{}", "ignore_eos": True}},
            "sampling_params.ignore_eos",
            "constrained",
        ),
    ],
)
def test_errors_name_the_field_the_request_used(
    kimi: LiveServer, path: str, body: dict, param: str, words: str
) -> None:
    if path == "/v1/completions":
        body = {"model": "kimi", **body}
    error = _error(httpx.post(kimi.url + path, json=body, timeout=60))
    assert error["param"] == param
    assert words in error["message"]


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
    error = _error(
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


def _sse(live: LiveServer, path: str, body: dict) -> list[dict]:
    reply = httpx.post(live.url + path, json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [httpx.Response(200, content=item).json() for item in data[:-1]]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_continuous_usage_stats_put_the_counts_so_far_on_every_chunk(
    kimi: LiveServer, path: str
) -> None:
    """vLLM's ``stream_options.continuous_usage_stats``: every chunk carries ``usage`` with
    the tokens so far; ember used to ignore it (null on every chunk but the last)."""
    body: dict = {"model": "kimi", "max_tokens": 6, "temperature": 0, "stream": True}
    if path == "/v1/completions":
        body["prompt"] = PROMPT
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
    options = {"include_usage": True, "continuous_usage_stats": True}
    chunks = _sse(kimi, path, {**body, "stream_options": options})
    *content, last = chunks
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 6
    prompt_tokens = last["usage"]["prompt_tokens"]
    counts = [c["usage"]["completion_tokens"] for c in content]
    assert counts == sorted(counts) and counts[-1] == 6
    for c in content:
        usage = c["usage"]
        assert usage["prompt_tokens"] == prompt_tokens
        assert usage["total_tokens"] == prompt_tokens + usage["completion_tokens"]
    # include_usage alone: usage is null on every chunk but the last, on both routes (OpenAI).
    plain = _sse(kimi, path, {**body, "stream_options": {"include_usage": True}})
    assert all(c["usage"] is None for c in plain[:-1]) and plain[-1]["usage"] is not None
    # continuous_usage_stats without include_usage adds nothing, as in vLLM.
    bare = _sse(kimi, path, {**body, "stream_options": {"continuous_usage_stats": True}})
    assert all("usage" not in c for c in bare)


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
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": PROMPT}),
    ],
)
def test_model_may_be_left_out_as_sglang_and_vllm_allow(
    kimi: LiveServer, path: str, body: dict
) -> None:
    """SGLang (``model`` defaults to the served model) and vLLM (``model`` optional) answer a
    body without ``model``; ember answered 400."""
    reply = httpx.post(kimi.url + path, json={**body, "max_tokens": 2}, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["model"] == "kimi"
    wrong = httpx.post(kimi.url + path, json={**body, "model": "gpt-4o"}, timeout=60)
    assert wrong.status_code == 404 and wrong.json()["error"]["code"] == "model_not_found"


def test_choices_say_which_stop_matched_as_sglang_does(kimi: LiveServer) -> None:
    """SGLang's OpenAI choices carry ``matched_stop`` (the stop string, or the token id: a stop
    id or EOS) beside ``finish_reason``, as its /generate does; ember's had none."""
    ids = _greedy_ids(kimi, 6)
    api = client(kimi)
    by_id = api.completions.create(
        model="kimi",
        prompt=PROMPT,
        max_tokens=6,
        temperature=0,
        extra_body={"stop_token_ids": [ids[1]]},
    )
    assert by_id.choices[0].model_extra["matched_stop"] == ids[1]
    whole = api.completions.create(model="kimi", prompt=PROMPT, max_tokens=6, temperature=0)
    assert whole.choices[0].model_extra["matched_stop"] is None  # length
    stop_text = whole.choices[0].text[2:4]
    by_text = api.completions.create(
        model="kimi", prompt=PROMPT, max_tokens=6, temperature=0, stop=[stop_text]
    )
    assert by_text.choices[0].finish_reason == "stop"
    assert by_text.choices[0].model_extra["matched_stop"] == stop_text
    streamed = list(
        api.completions.create(
            model="kimi", prompt=PROMPT, max_tokens=6, temperature=0, stop=[stop_text], stream=True
        )
    )
    assert streamed[-1].choices[0].model_extra["matched_stop"] == stop_text
    chat = dict(
        model="kimi",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=6,
        temperature=0,
        extra_body={"stop_token_ids": [ids[0]], "ignore_eos": False},
    )
    reply = api.chat.completions.create(**chat)
    if reply.choices[0].finish_reason == "stop":
        assert reply.choices[0].model_extra["matched_stop"] == ids[0]
    chunks = [c for c in api.chat.completions.create(**chat, stream=True) if c.choices]
    assert (
        chunks[-1].choices[0].model_extra["matched_stop"]
        == (reply.choices[0].model_extra["matched_stop"])
    )


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


def test_a_too_large_max_completion_tokens_is_named_so(kimi: LiveServer) -> None:
    """The context-window check named ``max_tokens`` when the client had sent OpenAI's newer
    ``max_completion_tokens``."""
    with pytest.raises(openai.BadRequestError) as caught:
        client(kimi).chat.completions.create(
            model="kimi",
            messages=[{"role": "user", "content": "hi"}],
            max_completion_tokens=10**6,
        )
    assert caught.value.param == "max_completion_tokens"
    assert "max_completion_tokens is 1000000" in caught.value.message


@pytest.mark.parametrize("stream", [False, True])
def test_completion_top_logprobs_include_the_sampled_token(kimi: LiveServer, stream: bool) -> None:
    """OpenAI's legacy completions and vLLM put the sampled token itself in each generated
    token's ``top_logprobs`` (up to ``logprobs`` + 1 entries), as the echoed prompt's entries
    already were; with ``logprobs: 1`` and sampling, the sampled token is often not the top."""
    body = {"prompt": PROMPT, "max_tokens": 8, "logprobs": 1, "seed": 7, "temperature": 1.5}
    if stream:
        chunks = _sse(kimi, "/v1/completions", {**body, "stream": True})
        parts = [c["choices"][0]["logprobs"] for c in chunks if c["choices"]]
        parts = [p for p in parts if p]
        tokens = sum((p["tokens"] for p in parts), [])
        values = sum((p["token_logprobs"] for p in parts), [])
        tops = sum((p["top_logprobs"] for p in parts), [])
    else:
        answer = httpx.post(kimi.url + "/v1/completions", json=body, timeout=60).json()
        logprobs = answer["choices"][0]["logprobs"]
        tokens, values, tops = (
            logprobs["tokens"],
            logprobs["token_logprobs"],
            logprobs["top_logprobs"],
        )
    assert len(tokens) == 8
    outside = 0
    for token, value, top in zip(tokens, values, tops, strict=True):
        assert top[token] == pytest.approx(value)
        assert next(iter(top)) == token  # the sampled token first, as vLLM's dict
        assert 1 <= len(top) <= 2
        outside += len(top) == 2
    assert outside > 0  # the seed samples below the top token at least once


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": PROMPT}),
        ("/generate", {"text": PROMPT}),
    ],
)
def test_a_temperature_above_2_is_served(kimi: LiveServer, path: str, body: dict) -> None:
    """SGLang's SamplingParams.verify and vLLM's refuse only a negative (or non-finite)
    temperature; ember's model server refused anything above 2 (Workers AI's schema, which
    the AI gateway still applies before a request reaches a replica)."""
    if path == "/generate":
        body = {**body, "sampling_params": {"max_new_tokens": 4, "temperature": 3.5, "seed": 7}}
    else:
        body = {"model": "kimi", **body, "max_tokens": 4, "temperature": 3.5, "seed": 7}
    answers = [httpx.post(kimi.url + path, json=body, timeout=60) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    assert answers[0].json()["usage" if path != "/generate" else "meta_info"] is not None
    if path == "/generate":  # seeded: the same tokens twice
        assert answers[0].json()["output_ids"] == answers[1].json()["output_ids"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/generate"])
@pytest.mark.parametrize("content_type", ["text/plain", None, "application/x-www-form-urlencoded"])
def test_a_body_not_sent_as_json_is_a_400(
    kimi: LiveServer, path: str, content_type: str | None
) -> None:
    """SGLang's OpenAI routes refuse any media type but application/json
    (``validate_json_request``: "Unsupported Media Type: Only 'application/json' is allowed",
    answered 400 by its RequestValidationError handler), and FastAPI refuses /generate's body
    without a JSON content type the same way; ember parsed the body whatever its type."""
    body = (
        {"text": PROMPT, "sampling_params": {"max_new_tokens": 1}}
        if path == "/generate"
        else {"model": "kimi", "prompt": PROMPT, "max_tokens": 1}
        if path == "/v1/completions"
        else {"model": "kimi", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    )
    headers = {"content-type": content_type} if content_type else {}
    request = httpx.Request("POST", kimi.url + path, content=json.dumps(body), headers=headers)
    assert request.headers.get("content-type") == content_type  # none for bytes in httpx
    with httpx.Client(timeout=60) as http:
        error = _error(http.send(request))
        assert "application/json" in error["message"], error
        assert (content_type or "no Content-Type") in error["message"], error
        ok = http.post(
            kimi.url + path,
            content=json.dumps(body),
            headers={"content-type": "Application/JSON; charset=utf-8"},
        )
        assert ok.status_code == 200, ok.text
