"""Request semantics a vLLM or SGLang client relies on, checked on a real ``ember models serve``
(kimi-tiny, a 512-token context) with the official ``openai`` client where the route is OpenAI's:
logprobs under a grammar stay finite JSON, stop strings never match inside the output parser's
markers, ``include_stop_str_in_output`` keeps a stop token's text, vLLM's ``stop_reason``,
context overflow errors clients recognise, and the ranges vLLM/SGLang accept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.models.server.live import serve_process

CONTEXT = 512
MSG = [{"role": "user", "content": "Write a short story about a cat."}]
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
PROMPT = "def fibonacci(n):"


@pytest.fixture(scope="module")
def url(kimi_dir: Path) -> Iterator[str]:
    with serve_process(
        str(kimi_dir),
        "--served-model-name",
        "kimi",
        "--context-length",
        str(CONTEXT),
        "--kv-cache-bytes",
        "16MiB",
        "--torch-threads",
        "1",
    ) as served:
        yield served


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=120)


def sse_events(url: str, path: str, body: dict) -> list[dict]:
    """The stream's events, each parsed as strict JSON (no -Infinity, no NaN)."""
    reply = post(url, path, {**body, "stream": True})
    assert reply.status_code == 200, reply.text
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(item, parse_constant=_refuse) for item in data[:-1]]


def _refuse(name: str) -> object:
    raise AssertionError(f"{name} is not JSON")


def strict_json(reply: httpx.Response) -> dict:
    assert reply.status_code == 200, reply.text
    return json.loads(reply.text, parse_constant=_refuse)


# 1. logprobs under a grammar: fewer than k tokens are allowed, the rest are -inf.


def _finite(values: list[float]) -> None:
    assert values and all(-9999.0 <= v <= 0.0 for v in values), values


def test_chat_top_logprobs_under_json_object(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="kimi",
        messages=MSG,
        max_tokens=3,
        temperature=0,
        logprobs=True,
        top_logprobs=5,
        response_format={"type": "json_object"},
        extra_body=NO_THINK,
    )
    first = reply.choices[0].logprobs.content[0]
    assert len(first.top_logprobs) == 5  # as vLLM: k entries, the masked ones at -9999
    _finite([first.logprob] + [t.logprob for t in first.top_logprobs])
    assert min(t.logprob for t in first.top_logprobs) == -9999.0


def test_chat_top_logprobs_under_a_regex_streamed(url: str) -> None:
    body = {
        "messages": MSG,
        "max_tokens": 3,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 3,
        "regex": "(yes|no)",
        **NO_THINK,
    }
    strict_json(post(url, "/v1/chat/completions", body))
    events = sse_events(url, "/v1/chat/completions", body)
    entries = [
        entry
        for event in events
        for choice in event["choices"]
        for entry in (choice.get("logprobs") or {}).get("content") or []
    ]
    _finite([t["logprob"] for entry in entries for t in entry["top_logprobs"]])


def test_completion_logprobs_under_json_object(url: str) -> None:
    body = {
        "prompt": "x",
        "max_tokens": 3,
        "temperature": 0,
        "logprobs": 3,
        "response_format": {"type": "json_object"},
    }
    answer = strict_json(post(url, "/v1/completions", body))
    tops = answer["choices"][0]["logprobs"]["top_logprobs"]
    _finite([v for top in tops for v in top.values()])
    events = sse_events(url, "/v1/completions", body)
    assert any(e["choices"] and e["choices"][0]["logprobs"] for e in events)


def test_generate_top_logprobs_under_a_regex(url: str) -> None:
    body = {
        "text": "x",
        "sampling_params": {"max_new_tokens": 3, "temperature": 0, "regex": "(yes|no)"},
        "return_logprob": True,
        "top_logprobs_num": 3,
    }
    answer = strict_json(post(url, "/generate", body))
    tops = answer["meta_info"]["output_top_logprobs"]
    _finite([entry[0] for top in tops for entry in top])
    sse_events(url, "/generate", body)


# 2. Stop strings are searched in the text the user gets, not in the parser's markers.


def _visible(message: dict) -> str:
    return (message.get("reasoning_content") or "") + (message.get("content") or "")


@pytest.mark.parametrize("stop", ["think", "</", ">"])
def test_chat_stop_strings_never_match_inside_the_think_marker(url: str, stop: str) -> None:
    base = {"messages": MSG, "max_tokens": 20, "temperature": 0}
    plain = strict_json(post(url, "/v1/chat/completions", {**base, "logprobs": True}))
    plain = plain["choices"][0]
    # The model closes its (empty) reasoning with the marker token first.
    assert plain["logprobs"]["content"][0]["token"] == "</think>"
    stopped = strict_json(post(url, "/v1/chat/completions", {**base, "stop": [stop]}))
    choice = stopped["choices"][0]
    text = _visible(plain["message"])
    if stop in text:
        assert choice["finish_reason"] == "stop"
        assert _visible(choice["message"]) == text[: text.index(stop)]
    else:
        assert choice["message"] == plain["message"]
        assert choice["finish_reason"] == plain["finish_reason"]
    streamed = sse_events(url, "/v1/chat/completions", {**base, "stop": [stop]})
    pieces = [
        (c["delta"].get("reasoning_content") or "") + (c["delta"].get("content") or "")
        for e in streamed
        for c in e["choices"]
    ]
    assert "".join(pieces) == _visible(choice["message"])


# 3. stop_token_ids with include_stop_str_in_output keep the stop token's text (vLLM).


def _greedy(url: str, n: int) -> tuple[list[int], str]:
    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": n, "temperature": 0}}
    answer = strict_json(post(url, "/generate", body))
    return answer["output_ids"], answer["text"]


def test_stop_token_ids_with_include_stop_str_in_output(client: openai.OpenAI, url: str) -> None:
    ids, _ = _greedy(url, 8)
    stop_id = ids[4]
    first = ids.index(stop_id)
    kept, without = _greedy(url, first + 1)[1], _greedy(url, first)[1]
    assert kept != without
    reply = client.completions.create(
        model="kimi",
        prompt=PROMPT,
        max_tokens=8,
        temperature=0,
        extra_body={"stop_token_ids": [stop_id], "include_stop_str_in_output": True},
    )
    assert reply.choices[0].text == kept
    plain = client.completions.create(
        model="kimi",
        prompt=PROMPT,
        max_tokens=8,
        temperature=0,
        extra_body={"stop_token_ids": [stop_id]},
    )
    assert plain.choices[0].text == without
    # SGLang's no_stop_trim on /generate keeps it too.
    params = {"max_new_tokens": 8, "temperature": 0, "stop_token_ids": [stop_id]}
    body = {"text": PROMPT, "sampling_params": {**params, "no_stop_trim": True}}
    assert strict_json(post(url, "/generate", body))["text"] == kept


# 4. vLLM's stop_reason beside SGLang's matched_stop, on every choice and finish chunk.


def _extra(choice: object) -> dict:
    extra = getattr(choice, "model_extra", None)
    assert extra is not None
    return extra


def test_stop_reason_on_completions(client: openai.OpenAI, url: str) -> None:
    ids, text = _greedy(url, 8)
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    kw = {"model": "kimi", "prompt": PROMPT, "max_tokens": 8, "temperature": 0}
    by_string = client.completions.create(**kw, stop=[stop])
    assert _extra(by_string.choices[0])["stop_reason"] == stop
    by_id = client.completions.create(**kw, extra_body={"stop_token_ids": [ids[3]]})
    assert _extra(by_id.choices[0])["stop_reason"] == ids[3]
    by_length = client.completions.create(**{**kw, "max_tokens": 2})
    assert by_length.choices[0].finish_reason == "length"
    extra = _extra(by_length.choices[0])
    assert "stop_reason" in extra and extra["stop_reason"] is None
    last = [c for c in client.completions.create(**kw, stop=[stop], stream=True) if c.choices]
    assert _extra(last[-1].choices[0])["stop_reason"] == stop


def test_stop_reason_names_a_generation_config_end_token(url: str) -> None:
    """vLLM moves generation_config.json's end tokens other than the tokenizer's own EOS into
    the request's stop_token_ids, so ending on one reports it as stop_reason; the tokenizer's
    EOS stays null (kimi-tiny: eos_token_id [8130, 8129], the tokenizer's EOS 8129)."""
    for token, reason in ((8130, 8130), (8129, None)):
        body = {"model": "kimi", "prompt": PROMPT, "max_tokens": 4, "temperature": 0}
        answer = strict_json(post(url, "/v1/completions", {**body, "logit_bias": {token: 100}}))
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        assert choice["stop_reason"] == reason, (token, choice)


def test_stop_reason_on_chat(client: openai.OpenAI) -> None:
    kw = {"model": "kimi", "messages": MSG, "max_tokens": 12, "temperature": 0}
    whole = client.chat.completions.create(**kw, extra_body=NO_THINK)
    stop = (whole.choices[0].message.content or "")[2:4]
    assert stop
    stopped = client.chat.completions.create(**kw, stop=[stop], extra_body=NO_THINK)
    assert _extra(stopped.choices[0])["stop_reason"] == stop
    extra = _extra(whole.choices[0])
    assert "stop_reason" in extra and extra["stop_reason"] is None  # length
    chunks = [
        c
        for c in client.chat.completions.create(**kw, stop=[stop], stream=True, extra_body=NO_THINK)
        if c.choices and c.choices[0].finish_reason
    ]
    assert _extra(chunks[-1].choices[0])["stop_reason"] == stop


# 5. Context overflow: OpenAI's code and vLLM's words, ember's explanation kept.


def test_chat_context_overflow_is_context_length_exceeded(client: openai.OpenAI) -> None:
    kw = {"model": "kimi", "messages": MSG, "temperature": 0, "extra_body": NO_THINK}
    prompt = client.chat.completions.create(**kw, max_tokens=1).usage.prompt_tokens
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**kw, max_tokens=CONTEXT)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith(
        f"This model's maximum context length is {CONTEXT} tokens. However, you requested "
        f"{prompt + CONTEXT} tokens ({prompt} in the messages, {CONTEXT} in the completion)."
    )
    assert f"leaves room for {CONTEXT - prompt}" in error["message"]
    assert caught.value.param == "max_tokens"


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        (
            {"prompt": [5] * 600},
            "prompt",
            "However, your prompt resulted in 600 tokens. Please reduce the length of the prompt",
        ),
        (
            {"prompt": [5] * 10, "max_tokens": CONTEXT},
            "max_tokens",
            f"(10 in the prompt, {CONTEXT} in the completion). Please reduce the length of the "
            "prompt or completion",
        ),
    ],
)
def test_completion_overflow_names_the_prompt(url: str, body: dict, param: str, words: str) -> None:
    # /v1/completions has no messages: OpenAI's own words there are "in your prompt".
    reply = post(url, "/v1/completions", {"model": "kimi", **body})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == param
    assert words in error["message"]
    assert "messages" not in error["message"]


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("/v1/completions", {"model": "kimi", "prompt": [5] * 600}, "prompt has 600 tokens"),
        ("/generate", {"input_ids": [5] * 600}, "prompt has 600 tokens"),
        (
            "/generate",
            {"input_ids": [5] * 10, "sampling_params": {"max_new_tokens": 600}},
            "max_new_tokens is 600",
        ),
    ],
)
def test_overflow_on_every_route(url: str, path: str, body: dict, words: str) -> None:
    reply = post(url, path, body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith(f"This model's maximum context length is {CONTEXT} tokens.")
    assert words in error["message"]


# 6. Ranges vLLM / SGLang accept on the model server.


def test_completion_logprobs_up_to_twenty(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="kimi", prompt=PROMPT, max_tokens=2, temperature=0, logprobs=20
    )
    assert len(reply.choices[0].logprobs.top_logprobs[0]) >= 20
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="kimi", prompt=PROMPT, max_tokens=2, logprobs=21)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": MSG, "max_tokens": 2, "repetition_penalty": 2.5}),
        ("/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "repetition_penalty": 7}),
        (
            "/generate",
            {"text": PROMPT, "sampling_params": {"max_new_tokens": 2, "repetition_penalty": 2.5}},
        ),
    ],
)
def test_repetition_penalty_above_two(url: str, path: str, body: dict) -> None:
    strict_json(post(url, path, body))
    bad = post(url, path, _with_penalty(body, 0))
    assert bad.status_code == 400


def _with_penalty(body: dict, value: float) -> dict:
    if "sampling_params" in body:
        return {**body, "sampling_params": {**body["sampling_params"], "repetition_penalty": value}}
    return {**body, "repetition_penalty": value}


def test_top_p_zero_is_the_most_likely_token_on_every_route(url: str) -> None:
    ids, text = _greedy(url, 6)
    sampled = {"temperature": 1.0, "top_p": 0, "seed": 3}
    generate = {"text": PROMPT, "sampling_params": {"max_new_tokens": 6, **sampled}}
    assert strict_json(post(url, "/generate", generate))["text"] == text
    completion = {"prompt": PROMPT, "max_tokens": 6, **sampled}
    assert strict_json(post(url, "/v1/completions", completion))["choices"][0]["text"] == text
    chat = {"messages": MSG, "max_tokens": 2, **sampled}
    strict_json(post(url, "/v1/chat/completions", chat))


def test_generate_default_max_new_tokens_is_clipped_to_the_context(url: str) -> None:
    ids = [5] * (CONTEXT - 62)
    body = {"input_ids": ids, "sampling_params": {"temperature": 0, "ignore_eos": True}}
    meta = strict_json(post(url, "/generate", body))["meta_info"]
    assert meta["completion_tokens"] == 62
    assert meta["finish_reason"]["type"] == "length"
    # An explicit max_new_tokens past the context is still refused (SGLang's tokenizer manager).
    body["sampling_params"]["max_new_tokens"] = 63
    assert post(url, "/generate", body).status_code == 400
