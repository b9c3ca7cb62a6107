"""Prompt logprobs over HTTP, in each API's format, against a plain whole-sequence forward of the
served model (``reference_forward``): SGLang's ``input_token_logprobs`` (``logprob_start_len``),
OpenAI's and vLLM's ``echo`` with ``logprobs``, vLLM's ``prompt_logprobs``; on random prompts
long enough for chunked prefill, in float32 and with an FP8 KV cache."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from ember.models.api.chat_request import parse_chat_request
from ember.models.engine.logprob_types import PromptLogprobSpec, PromptTokenLogprob
from ember.models.engine.prompt_logprobs import reference_prompt_logprobs
from ember.models.server.inputs import chat_input
from tests.models.server.live import LiveServer, running_server, server_settings


@pytest.fixture(scope="module")
def exact(glm_dir: Path) -> Iterator[LiveServer]:
    """glm4moe-tiny in float32 with a float32 KV cache, prefill in chunks of 64 tokens."""
    settings = server_settings(
        str(glm_dir), served_model_name="glm", dtype="float32", chunked_prefill_size=64
    )
    with running_server(settings) as live:
        yield live


def _prompt(seed: int, length: int, vocab: int = 4000) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, vocab) for _ in range(length)]


def _reference(
    live: LiveServer, prompt: list[int], start: int, top: int
) -> list[PromptTokenLogprob]:
    served = live.state.served
    assert served is not None
    with torch.inference_mode():
        logits = served.llm.runner.model.reference_forward(torch.tensor([prompt]))  # type: ignore[attr-defined]
    return reference_prompt_logprobs(logits[0], prompt, PromptLogprobSpec(start, top))


def _generate(live: LiveServer, prompt: list[int], start: int, top: int, new: int = 0) -> dict:
    body = {
        "input_ids": prompt,
        "return_logprob": True,
        "logprob_start_len": start,
        "top_logprobs_num": top,
        "sampling_params": {"max_new_tokens": new, "temperature": 0},
    }
    reply = httpx.post(live.url + "/generate", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()["meta_info"]


def test_generate_input_logprobs_equal_the_reference_across_chunks(exact: LiveServer) -> None:
    prompt = _prompt(seed=1, length=150)  # 3 chunks of 64
    meta = _generate(exact, prompt, start=0, top=3)
    want = _reference(exact, prompt, 1, 3)
    entries = meta["input_token_logprobs"]
    assert len(entries) == len(prompt) and meta["prompt_tokens"] == len(prompt)
    assert entries[0][:2] == [None, prompt[0]]
    assert [e[1] for e in entries] == prompt
    got = torch.tensor([e[0] for e in entries[1:]])
    assert torch.allclose(got, torch.tensor([w.logprob for w in want]), atol=1e-4)
    tops = meta["input_top_logprobs"]
    assert tops[0] is None and all(len(t) == 3 for t in tops[1:])
    for top, ref in zip(tops[1:], want, strict=True):
        assert [t[1] for t in top][:1] == [ref.top[0][0]]  # the most likely token
        assert abs(top[0][0] - ref.top[0][1]) < 1e-4
    assert meta["completion_tokens"] == 0 and "output_token_logprobs" in meta


def test_a_warm_prefix_cache_skips_no_position_and_a_late_start_matches(exact: LiveServer) -> None:
    prompt = _prompt(seed=2, length=130)
    first = _generate(exact, prompt, start=0, top=0, new=2)["input_token_logprobs"]
    again = _generate(exact, prompt, start=0, top=0, new=2)  # every page is cached by now
    assert again["input_token_logprobs"] == first
    late = _generate(exact, prompt, start=100, top=0)
    entries = late["input_token_logprobs"]
    assert late["cached_tokens"] > 0, "pages before position 100 may come from the cache"
    assert len(entries) == len(prompt) - 100 and entries[0][:2] == [None, prompt[100]]
    # SGLang scores from the row at logprob_start_len: the first entry is null.
    assert [e[0] for e in entries[1:]] == pytest.approx([e[0] for e in first[101:]], abs=1e-5)
    assert "input_top_logprobs" not in late
    # SGLang's default start (-1) is the last prompt token: one null entry, nothing computed.
    default = _generate(exact, prompt, start=-1, top=2, new=1)
    assert default["input_token_logprobs"] == [[None, prompt[-1], entries[-1][2]]]
    assert default["input_top_logprobs"] == [None]
    assert len(default["output_token_logprobs"]) == 1


def test_completion_echo_scores_the_prompt_as_vllm_does(exact: LiveServer) -> None:
    prompt = _prompt(seed=3, length=90)
    body = {"prompt": prompt, "echo": True, "logprobs": 2, "max_tokens": 0}
    reply = httpx.post(exact.url + "/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    logprobs = choice["logprobs"]
    want = _reference(exact, prompt, 1, 2)
    assert len(logprobs["tokens"]) == len(prompt) == len(logprobs["text_offset"])
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    got = torch.tensor(logprobs["token_logprobs"][1:])
    assert torch.allclose(got, torch.tensor([w.logprob for w in want]), atol=1e-4)
    for token, top in zip(logprobs["tokens"][1:], logprobs["top_logprobs"][1:], strict=True):
        assert token in top and 1 <= len(top) <= 3  # the token itself and the 2 most likely
    assert logprobs["text_offset"][0] == 0
    # vLLM's prompt_logprobs rides along: token id -> logprob, rank, decoded_token.
    listed = choice["prompt_logprobs"]
    assert listed[0] is None and len(listed) == len(prompt)
    for token_id, item, ref in zip(prompt[1:], listed[1:], want, strict=True):
        entry = item[str(token_id)]
        assert entry["logprob"] == pytest.approx(ref.logprob, abs=1e-4)
        assert abs(entry["rank"] - ref.rank) <= 1 and isinstance(entry["decoded_token"], str)
    assert choice["finish_reason"] == "length" and reply.json()["usage"]["completion_tokens"] == 0


def test_completion_echo_with_output_tokens_lists_prompt_then_output(exact: LiveServer) -> None:
    prompt = _prompt(seed=4, length=20)
    body = {"prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 3, "temperature": 0}
    body["ignore_eos"] = True
    logprobs = httpx.post(exact.url + "/v1/completions", json=body, timeout=120).json()
    logprobs = logprobs["choices"][0]["logprobs"]
    assert len(logprobs["token_logprobs"]) == len(prompt) + 3
    assert all(v is not None for v in logprobs["token_logprobs"][1:])
    offsets = logprobs["text_offset"]
    assert offsets == sorted(offsets)
    streamed = _stream(exact, body | {"stream": True})
    first = streamed[0]["choices"][0]
    assert first["logprobs"]["token_logprobs"] == logprobs["token_logprobs"][: len(prompt)]
    later = [c["choices"][0]["logprobs"]["token_logprobs"] for c in streamed[1:] if c["choices"]]
    assert sum(later, []) == pytest.approx(logprobs["token_logprobs"][len(prompt) :], abs=1e-5)


def _stream(live: LiveServer, body: dict) -> list[dict]:
    reply = httpx.post(live.url + "/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(item) for item in data[:-1]]


def test_vllm_prompt_logprobs_without_echo(exact: LiveServer) -> None:
    prompt = _prompt(seed=5, length=12)
    body = {"prompt": prompt, "prompt_logprobs": 2, "max_tokens": 2, "temperature": 0}
    choice = httpx.post(exact.url + "/v1/completions", json=body, timeout=120).json()["choices"][0]
    listed = choice["prompt_logprobs"]
    assert listed[0] is None and len(listed) == len(prompt)
    want = _reference(exact, prompt, 1, 2)
    for token_id, item, ref in zip(prompt[1:], listed[1:], want, strict=True):
        assert item[str(token_id)]["logprob"] == pytest.approx(ref.logprob, abs=1e-4)
        ranked = sorted((v["rank"], k) for k, v in item.items() if k != str(token_id))
        assert [int(k) for _, k in ranked][:1] in ([ref.top[0][0]], [])
    assert choice["logprobs"] is None
    refused = httpx.post(exact.url + "/v1/completions", json=body | {"stream": True}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "prompt_logprobs"


def test_vllm_prompt_logprobs_on_chat(exact: LiveServer) -> None:
    """vLLM takes ``prompt_logprobs`` on chat too: the rendered prompt's tokens, on the
    response object (``prompt_logprobs``, not in the choice); refused with ``stream``."""
    served = exact.state.served
    assert served is not None
    body = {
        "messages": [{"role": "user", "content": "def area(r): return 3.14 * r * r"}],
        "prompt_logprobs": 2,
        "max_tokens": 2,
        "temperature": 0,
    }
    reply = httpx.post(exact.url + "/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    listed = answer["prompt_logprobs"]
    prompt = chat_input(served, parse_chat_request(body), "r").generation.prompt_ids
    assert listed[0] is None and len(listed) == len(prompt)
    assert answer["usage"]["prompt_tokens"] == len(prompt)
    want = _reference(exact, prompt, 1, 2)
    for token_id, item, ref in zip(prompt[1:], listed[1:], want, strict=True):
        entry = item[str(token_id)]
        assert entry["logprob"] == pytest.approx(ref.logprob, abs=1e-4)
        assert abs(entry["rank"] - ref.rank) <= 1 and isinstance(entry["decoded_token"], str)
        assert 1 <= len(item) <= 3  # the token and its 2 most likely alternatives
    assert "prompt_logprobs" not in answer["choices"][0]
    plain = httpx.post(exact.url + "/v1/chat/completions", json=body | {"prompt_logprobs": None})
    assert "prompt_logprobs" not in plain.json()
    streamed = body | {"stream": True}
    refused = httpx.post(exact.url + "/v1/chat/completions", json=streamed, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "prompt_logprobs"


@pytest.fixture(scope="module", params=["fp8_e4m3", "fp8_e5m2"])
def fp8(kimi_dir: Path, request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """kimi-tiny (MLA) in float32 with an FP8 KV cache (either of SGLang's two formats): the
    cache is the only rounding."""
    settings = server_settings(
        str(kimi_dir),
        served_model_name="kimi",
        dtype="float32",
        kv_cache_dtype=request.param,
        chunked_prefill_size=128,
    )
    with running_server(settings) as live:
        yield live


def test_fp8_kv_prompt_logprobs_follow_the_reference(fp8: LiveServer) -> None:
    """A 300-token prompt in three chunks; FP8 keys and values move each logprob a little
    (measured on this prompt: mean 0.08, max 0.85 nats; a float32 cache matches to 1e-4), a
    position off by one moves it by nats."""
    prompt = _prompt(seed=6, length=300)
    served = fp8.state.served
    assert served is not None
    stored = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
    assert served.llm.runner.pool.dtype == stored[fp8.state.settings.kv_cache_dtype]
    meta = _generate(fp8, prompt, start=0, top=0)
    entries = meta["input_token_logprobs"]
    assert len(entries) == len(prompt) and entries[0][0] is None
    got = torch.tensor([e[0] for e in entries[1:]])
    want = torch.tensor([w.logprob for w in _reference(fp8, prompt, 1, 0)])
    error = (got - want).abs()
    assert error.mean() < 0.25 and error.max() < 3.0, (error.mean(), error.max())
    shifted = (got[1:] - want[:-1]).abs().mean()
    assert shifted > 10 * error.mean(), "the comparison must tell positions apart"
