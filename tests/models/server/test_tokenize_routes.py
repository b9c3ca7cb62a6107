"""``/tokenize`` and ``/detokenize`` (vLLM's shapes; SGLang's at ``/v1/tokenize`` and
``/v1/detokenize``) on a real ``ember models serve`` subprocess: the ids are the ones the engine
is fed, with the checkpoint's HF tokenizer as an independent judge of the plain-text form."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from transformers import PreTrainedTokenizerFast

from tests.models.server.live import bad_request

MESSAGES = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "def add(a, b):"},
]
TEXT = "import os\nprint(os.getcwd())\n"


@pytest.fixture(scope="module")
def hf(kimi_dir: Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_file=str(kimi_dir / "tokenizer.json"))


def _post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60)


TOOL = {
    "type": "function",
    "function": {
        "name": "run",
        "description": "Run Python code.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
    },
}


@pytest.mark.parametrize(
    "extra",
    [{}, {"tools": [TOOL]}, {"chat_template_kwargs": {"enable_thinking": False}}],
    ids=["plain", "tools", "thinking-off"],
)
def test_chat_form_is_the_prompt_chat_completions_feeds_the_engine(
    kimi_process: str, extra: dict
) -> None:
    request = {"model": "kimi", "messages": MESSAGES, **extra}
    answer = _post(kimi_process, "/tokenize", request)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"count", "max_model_len", "tokens", "token_strs"}
    assert body["token_strs"] is None and body["count"] == len(body["tokens"])
    chat = _post(
        kimi_process,
        "/v1/chat/completions",
        {**request, "max_tokens": 1, "prompt_logprobs": 0},
    ).json()
    assert chat["usage"]["prompt_tokens"] == body["count"]
    # vLLM's prompt_logprobs name every prompt token the engine scored (all but the first).
    seen = [int(next(iter(entry))) for entry in chat["prompt_logprobs"][1:]]
    assert seen == body["tokens"][1:]
    models = httpx.get(kimi_process + "/v1/models", timeout=10).json()
    assert body["max_model_len"] == models["data"][0]["max_model_len"]


def test_chat_form_follows_the_template_switches(kimi_process: str) -> None:
    def tokens(**fields: object) -> list[int]:
        answer = _post(kimi_process, "/tokenize", {"messages": MESSAGES, **fields})
        assert answer.status_code == 200, answer.text
        return answer.json()["tokens"]

    with_prompt, without = tokens(), tokens(add_generation_prompt=False)
    assert with_prompt[: len(without)] == without and len(with_prompt) > len(without)
    prefill = [*MESSAGES, {"role": "assistant", "content": "    return a +"}]
    continued = _post(
        kimi_process,
        "/tokenize",
        {"messages": prefill, "add_generation_prompt": False, "continue_final_message": True},
    ).json()
    text = _post(kimi_process, "/detokenize", {"tokens": continued["tokens"]}).json()["prompt"]
    assert text.endswith("    return a +")  # open-ended: no end-of-turn after the prefill
    both = _post(
        kimi_process,
        "/tokenize",
        {"messages": prefill, "add_generation_prompt": True, "continue_final_message": True},
    )
    assert bad_request(both)["param"] == "continue_final_message"


def test_completion_form_matches_the_checkpoints_hf_tokenizer(
    kimi_process: str, hf: PreTrainedTokenizerFast
) -> None:
    for special in (True, False):
        body = _post(
            kimi_process,
            "/tokenize",
            {"prompt": TEXT, "add_special_tokens": special, "return_token_strs": True},
        ).json()
        assert body["tokens"] == hf(TEXT, add_special_tokens=special)["input_ids"]
        assert body["token_strs"] == hf.convert_ids_to_tokens(body["tokens"])
        assert body["count"] == len(body["tokens"])
    completion = _post(
        kimi_process, "/v1/completions", {"model": "kimi", "prompt": TEXT, "max_tokens": 1}
    ).json()
    assert completion["usage"]["prompt_tokens"] == len(hf(TEXT)["input_ids"])


def test_detokenize_round_trips(kimi_process: str, hf: PreTrainedTokenizerFast) -> None:
    tokens = _post(kimi_process, "/tokenize", {"prompt": TEXT}).json()["tokens"]
    vllm = _post(kimi_process, "/detokenize", {"tokens": tokens})
    assert vllm.status_code == 200 and vllm.json()["prompt"] == TEXT
    assert hf.decode(tokens) == TEXT
    sglang = _post(kimi_process, "/v1/detokenize", {"tokens": [tokens, tokens[:2]]})
    assert sglang.json() == {"text": [TEXT, hf.decode(tokens[:2])]}


def test_sglang_tokenize_takes_a_batch_of_prompts(
    kimi_process: str, hf: PreTrainedTokenizerFast
) -> None:
    body = _post(kimi_process, "/v1/tokenize", {"prompt": [TEXT, "x"]}).json()
    expected = [hf(TEXT)["input_ids"], hf("x")["input_ids"]]
    assert body["tokens"] == expected
    assert body["count"] == [len(ids) for ids in expected]
    single = _post(kimi_process, "/v1/tokenize", {"prompt": TEXT}).json()
    assert set(single) == {"tokens", "count", "max_model_len"}


@pytest.mark.parametrize("path", ["/detokenize", "/v1/detokenize"])
def test_token_ids_outside_the_vocabulary_are_a_400_naming_the_field(
    kimi_process: str, hf: PreTrainedTokenizerFast, path: str
) -> None:
    vocab = len(hf)
    error = bad_request(_post(kimi_process, path, {"tokens": [1, vocab]}))
    assert error["param"] == "tokens.[1]" and str(vocab) in error["message"]
    assert bad_request(_post(kimi_process, path, {"tokens": [-1]}))["param"] == "tokens.[0]"
    assert bad_request(_post(kimi_process, path, {"tokens": "12"}))["param"] == "tokens"


def test_tokenize_names_what_is_missing_or_wrong(kimi_process: str) -> None:
    assert bad_request(_post(kimi_process, "/tokenize", {}))["param"] == "prompt"
    assert bad_request(_post(kimi_process, "/tokenize", {"prompt": 3}))["param"] == "prompt"
    error = bad_request(_post(kimi_process, "/tokenize", {"messages": [{"role": "user"}]}))
    assert error["param"].startswith("messages.[0]")
    wrong = _post(kimi_process, "/tokenize", {"model": "nope", "prompt": "x"})
    assert wrong.status_code == 404 and wrong.json()["error"]["code"] == "model_not_found"
