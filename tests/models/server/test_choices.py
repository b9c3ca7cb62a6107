"""``n`` choices per request against real ``ember models serve`` processes (the tiny GLM and
Kimi checkpoints), with the official ``openai`` client: whole and streamed answers, seeds,
greedy equality, usage, constraints on every choice, the prompt prefilled once (the engine's
counters), the KV budget check, and a streamed request whose client goes away."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from ember.models.api.sse import parse_sse
from tests.models.server.served_process import ServedProcess, served_process

NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
LONG = "Explain how Python's dict and list types work, with examples. " * 5
UNIT_SCHEMA = {
    "type": "object",
    "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["unit"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "The forecast", "parameters": UNIT_SCHEMA},
}


@pytest.fixture(scope="module")
def glm(glm_dir: Path) -> Iterator[ServedProcess]:
    # Two running requests at most: a request's n sequences count against it.
    with served_process(
        glm_dir, "glm", "--kv-cache-bytes", "8MiB", "--max-running-requests", "2"
    ) as served:
        yield served


@pytest.fixture(scope="module")
def kimi(kimi_dir: Path) -> Iterator[ServedProcess]:
    with served_process(kimi_dir, "kimi", "--kv-cache-bytes", "16MiB") as served:
        yield served


def client(served: ServedProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def metrics(served: ServedProcess) -> dict[str, float]:
    out = {}
    for line in httpx.get(served.url + "/metrics", timeout=30).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = float(value)
    return out


def chat(served: ServedProcess, **fields: object) -> openai.types.chat.ChatCompletion:
    return client(served).chat.completions.create(
        model=served_name(served),
        messages=[{"role": "user", "content": fields.pop("content", LONG)}],  # type: ignore[typeddict-item]
        **fields,  # type: ignore[arg-type]
    )


def served_name(served: ServedProcess) -> str:
    return httpx.get(served.url + "/v1/models", timeout=30).json()["data"][0]["id"]


def test_n_choices_with_a_seed_are_reproducible_and_differ(glm: ServedProcess) -> None:
    fields = dict(n=4, max_tokens=10, seed=11, temperature=1.0, extra_body=NO_THINKING)
    first, again = chat(glm, **fields), chat(glm, **fields)
    assert [c.index for c in first.choices] == [0, 1, 2, 3]
    texts = [c.message.content for c in first.choices]
    assert texts == [c.message.content for c in again.choices]
    assert len(set(texts)) > 1, texts  # each choice samples with its own seed (seed + index)
    assert all(c.finish_reason in ("length", "stop") for c in first.choices)
    one = chat(glm, max_tokens=10, seed=11, extra_body=NO_THINKING)
    # The prompt is counted once; the completion tokens are summed over the choices (all of
    # them run to max_tokens here, or stop early at EOS).
    assert first.usage.prompt_tokens == one.usage.prompt_tokens
    cut = sum(c.finish_reason == "length" for c in first.choices)
    assert cut * 10 <= first.usage.completion_tokens <= 4 * 10
    assert first.usage.completion_tokens > 10
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


def glm_tokens(served: ServedProcess, text: str | None) -> list[int]:
    body = {"model": "glm", "prompt": text or "", "add_special_tokens": False}
    return httpx.post(served.url + "/tokenize", json=body, timeout=30).json()["tokens"]


def test_greedy_choices_are_equal(glm: ServedProcess) -> None:
    reply = chat(glm, n=3, max_tokens=8, temperature=0, logprobs=True, extra_body=NO_THINKING)
    texts = {c.message.content for c in reply.choices}
    assert len(reply.choices) == 3 and len(texts) == 1
    # Each choice has its own logprobs: one entry per token it generated.
    tokens = [[t.token for t in c.logprobs.content] for c in reply.choices]
    lengths = [len(t) for t in tokens]
    assert all(
        n == 8 or c.finish_reason == "stop" for n, c in zip(lengths, reply.choices, strict=True)
    )
    assert (
        tokens[0] == tokens[1] == tokens[2]
        and "".join(tokens[0]) == reply.choices[0].message.content
    )


def test_the_prompt_is_prefilled_once_and_shared(glm: ServedProcess) -> None:
    page = httpx.get(glm.url + "/server_info", timeout=30).json()["kv_cache"]["page_size"]
    prompt = "def shared_prefix_check():\n" + "    value = compute(value) + 1\n" * 12
    ids = glm_tokens(glm, prompt)
    assert len(ids) > 3 * page
    before = metrics(glm)["ember:prefill_tokens_computed_total"]
    body = {"input_ids": ids, "sampling_params": {"n": 3, "max_new_tokens": 4, "seed": 1}}
    answers = httpx.post(glm.url + "/generate", json=body, timeout=120).json()
    computed = metrics(glm)["ember:prefill_tokens_computed_total"] - before
    shared = (len(ids) - 1) // page * page  # the prompt's full pages, but for its last token
    # Choice 0 computes the whole prompt; each other choice only what follows the shared pages.
    assert computed == len(ids) + 2 * (len(ids) - shared)
    assert [a["meta_info"]["cached_tokens"] for a in answers] == [0, shared, shared]
    assert all(a["meta_info"]["prompt_tokens"] == len(ids) for a in answers)


def test_generate_answers_a_list_and_streams_indexed_entries(glm: ServedProcess) -> None:
    body = {"text": "import os\n", "sampling_params": {"n": 3, "max_new_tokens": 5, "seed": 3}}
    answers = httpx.post(glm.url + "/generate", json=body, timeout=120).json()
    assert isinstance(answers, list) and len(answers) == 3
    assert all(a["meta_info"]["completion_tokens"] == 5 for a in answers)
    assert len({a["meta_info"]["id"] for a in answers}) == 3
    events = parse_sse(
        httpx.post(glm.url + "/generate", json={**body, "stream": True}, timeout=120).content
    )
    assert events[-1] == "[DONE]"
    last = {e["index"]: e for e in events[:-1]}  # type: ignore[index]
    assert sorted(last) == [0, 1, 2]
    assert [last[i]["text"] for i in range(3)] == [a["text"] for a in answers]


def test_stream_reassembles_each_choice(glm: ServedProcess) -> None:
    chunks = list(
        client(glm).chat.completions.create(
            model="glm",
            messages=[{"role": "user", "content": LONG}],
            n=3,
            max_tokens=9,
            seed=5,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=NO_THINKING,
        )
    )
    finishes = [c.choices[0].index for c in chunks if c.choices and c.choices[0].finish_reason]
    assert sorted(finishes) == [0, 1, 2]  # every choice ends with its own finish chunk
    usage = [c for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1] is usage[0] and not usage[0].choices
    whole = chat(glm, n=3, max_tokens=9, seed=5, extra_body=NO_THINKING)
    assert usage[0].usage.prompt_tokens == whole.usage.prompt_tokens
    assert 3 <= usage[0].usage.completion_tokens <= 27
    # Each index's role chunk comes first, once.
    roles = [c.choices[0].index for c in chunks if c.choices and c.choices[0].delta.role]
    assert roles == [0, 1, 2]
    # The client's stream helper puts the choices back together by index.
    with client(glm).chat.completions.stream(
        model="glm",
        messages=[{"role": "user", "content": LONG}],
        n=3,
        max_tokens=9,
        seed=5,
        extra_body=NO_THINKING,
    ) as stream:
        for _ in stream:
            pass
        # (get_final_completion refuses answers cut by max_tokens: the snapshot is the same.)
        final = stream.current_completion_snapshot
    assert [c.index for c in final.choices] == [0, 1, 2]
    assert all(c.message.content and c.finish_reason for c in final.choices)


def test_completions_n_with_echo_and_logprobs(glm: ServedProcess) -> None:
    reply = client(glm).completions.create(
        model="glm", prompt="def add(a, b):", n=2, max_tokens=4, echo=True, logprobs=1, seed=2
    )
    assert [c.index for c in reply.choices] == [0, 1]
    for choice in reply.choices:
        assert choice.text.startswith("def add(a, b):")
        assert choice.logprobs.token_logprobs[0] is None  # the echoed prompt, on every choice
        assert len(choice.logprobs.tokens) == len(glm_tokens(glm, "def add(a, b):")) + 4
    assert reply.usage.completion_tokens == 8
    with pytest.raises(openai.BadRequestError) as caught:
        client(glm).completions.create(model="glm", prompt="x", n=2, best_of=3)
    assert caught.value.body["param"] == "best_of"  # type: ignore[index]
    events = parse_sse(
        httpx.post(
            glm.url + "/v1/completions",
            json={"prompt": "x = ", "n": 2, "max_tokens": 3, "stream": True,
                  "stream_options": {"include_usage": True}},
            timeout=120,
        ).content
    )  # fmt: skip
    ends = [
        e["choices"][0]["index"]
        for e in events[:-1]
        if e["choices"] and e["choices"][0]["finish_reason"]
    ]  # type: ignore[index]  # noqa: E501
    assert sorted(ends) == [0, 1] and events[-1] == "[DONE]"
    assert events[-2]["usage"]["completion_tokens"] == 6  # type: ignore[index]


def test_json_schema_holds_on_every_choice(glm: ServedProcess) -> None:
    reply = chat(
        glm,
        content="Which unit?",
        n=3,
        max_tokens=40,
        seed=4,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "u", "schema": UNIT_SCHEMA},
        },
        extra_body=NO_THINKING,
    )
    for choice in reply.choices:
        jsonschema.validate(json.loads(choice.message.content), UNIT_SCHEMA)


def test_a_forced_tool_call_on_every_choice(kimi: ServedProcess) -> None:
    reply = chat(
        kimi,
        content="Weather in Paris?",
        n=3,
        max_tokens=60,
        seed=8,
        tools=[WEATHER_TOOL],
        tool_choice="required",
        parallel_tool_calls=False,
        extra_body=NO_THINKING,
    )
    for choice in reply.choices:
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), UNIT_SCHEMA)


def test_choice_i_is_the_single_answer_seeded_seed_plus_i(kimi: ServedProcess) -> None:
    """vLLM's per-choice seeds, and a parser per choice: choice i of an n-request is, reasoning
    and content alike, what a request of one choice seeded seed + i answers."""
    fields = dict(content="Explain os.path.join.", max_tokens=16, temperature=0.8)
    several = chat(kimi, n=3, seed=40, **fields)
    reasoning = 0
    for index, choice in enumerate(several.choices):
        alone = chat(kimi, seed=40 + index, **fields)
        assert choice.message.content == alone.choices[0].message.content
        assert choice.message.model_extra.get("reasoning_content") == (
            alone.choices[0].message.model_extra.get("reasoning_content")
        )
        reasoning += alone.usage.completion_tokens_details.reasoning_tokens
    assert several.usage.completion_tokens_details.reasoning_tokens == reasoning


def test_n_beyond_the_kv_budget_is_a_400_naming_n(glm: ServedProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat(glm, n=128, max_tokens=2000, extra_body=NO_THINKING)
    error = caught.value.body
    assert error["param"] == "n" and "pages of KV cache" in error["message"]  # type: ignore[index]
    assert len(chat(glm, n=8, max_tokens=4, extra_body=NO_THINKING).choices) == 8


def test_a_streamed_n_request_whose_client_leaves_frees_every_page(glm: ServedProcess) -> None:
    body = {
        "model": "glm",
        "messages": [{"role": "user", "content": LONG}],
        "n": 4,
        "max_tokens": 900,
        "ignore_eos": True,
        "stream": True,
        **NO_THINKING,
    }
    pieces = 0
    with httpx.stream("POST", glm.url + "/v1/chat/completions", json=body, timeout=120) as reply:
        for line in reply.iter_lines():
            pieces += line.startswith("data: {") and '"role"' not in line
            if pieces == 6:
                held = metrics(glm)  # while the stream is open (leaving the loop closes it)
                break
        # Four sequences, two running (--max-running-requests 2) and two waiting.
        assert held["sglang:num_running_reqs"] + held["sglang:num_queue_reqs"] == 4
        assert held["sglang:num_running_reqs"] == 2 and held["sglang:num_used_tokens"] > 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = metrics(glm)
        if now["sglang:num_running_reqs"] + now["sglang:num_queue_reqs"] == 0:
            break
        time.sleep(0.2)
    assert now["sglang:num_running_reqs"] + now["sglang:num_queue_reqs"] == 0
    assert now["sglang:num_used_tokens"] == 0  # every choice's pages went back
