"""What a user of SGLang or vLLM expects of the same request: extensions that are honoured
(``stop_token_ids``), errors that name the field the client sent in each API's own words."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.models.server.live import LiveServer, bad_request

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
    error = bad_request(httpx.post(kimi.url + path, json=body, timeout=60))
    assert error["param"] == param
    assert words in error["message"]


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


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_continuous_usage_stats_count_each_choice_on_its_own_chunks(
    kimi: LiveServer, path: str
) -> None:
    """With n > 1 a chunk's ``completion_tokens`` is its own choice's so far (vLLM:
    ``previous_num_tokens[i]``), not the sum over the choices; the final usage sums them."""
    body: dict = {"model": "kimi", "max_tokens": 5, "ignore_eos": True, "stream": True}
    body |= {
        "n": 2,
        "seed": 4,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if path == "/v1/completions":
        body["prompt"] = PROMPT
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
        body["chat_template_kwargs"] = {"enable_thinking": False}
    *content, last = _sse(kimi, path, body)
    assert last["usage"]["completion_tokens"] == 10
    counts: dict[int, list[int]] = {0: [], 1: []}
    for c in content:
        for choice in c["choices"]:
            counts[choice["index"]].append(c["usage"]["completion_tokens"])
    for seen in counts.values():
        assert seen == sorted(seen) and max(seen) == 5, counts


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
        error = bad_request(http.send(request))
        assert "application/json" in error["message"], error
        assert (content_type or "no Content-Type") in error["message"], error
        ok = http.post(
            kimi.url + path,
            content=json.dumps(body),
            headers={"content-type": "Application/JSON; charset=utf-8"},
        )
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"sampling_params": {"max_new_tokens": 1}}, "text", "missing_required_parameter"),
        ({"text": PROMPT, "input_ids": [1, 2]}, "input_ids", "invalid_value"),
    ],
)
def test_generate_without_exactly_one_prompt_names_the_field(
    kimi: LiveServer, body: dict, param: str, code: str
) -> None:
    """``/generate`` takes ``text`` or ``input_ids``: the 400 names the field to send (none
    came) or the one to drop (both came) in ``param``, as every other 400 here does."""
    error = bad_request(httpx.post(kimi.url + "/generate", json=body, timeout=60))
    assert error["param"] == param and error["code"] == code, error
    assert "exactly one of 'text' or 'input_ids'" in error["message"]
