"""Special tokens at encode, as vLLM and SGLang add them: a text prompt on ``/v1/completions``
and ``/generate`` gets the tokenizer's BOS (HF's ``add_special_tokens=True``), a chat prompt does
not (its template writes its own); vLLM's ``add_special_tokens`` turns either way around, and
``/tokenize`` gives the very ids the engine is fed.

The shipped tokenizers add nothing (no post-processor), so a test on them could not fail: this
module serves kimi-tiny with a tokenizer.json whose post-processor puts ``[BOS]`` first, as a
Llama or DeepSeek tokenizer does, and reads the HF tokenizer of those files as the oracle."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from transformers import PreTrainedTokenizerFast

from tests.models.server.live import LiveServer, running_server, server_settings

# Longer than a few KV pages, so that a repeated prompt is a prefix-cache hit.
TEXT = "import os\nimport sys\n\n\ndef main(argv):\n    for name in sorted(os.listdir('.')):\n" * 4
MESSAGES = [{"role": "user", "content": "def add(a, b):"}]


@pytest.fixture(scope="module")
def bos_dir(kimi_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kimi-tiny's files, its tokenizer.json given a post-processor that prepends [BOS]."""
    out = tmp_path_factory.mktemp("kimi-bos")
    for source in kimi_dir.iterdir():
        if source.name != "tokenizer.json":
            (out / source.name).symlink_to(source)
    tokenizer = json.loads((kimi_dir / "tokenizer.json").read_text())
    bos = next(t for t in tokenizer["added_tokens"] if t["content"] == "[BOS]")
    first = {"SpecialToken": {"id": "[BOS]", "type_id": 0}}
    a, b = ({"Sequence": {"id": name, "type_id": i}} for i, name in enumerate("AB"))
    tokenizer["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [first, a],
        "pair": [first, a, b],
        "special_tokens": {"[BOS]": {"id": "[BOS]", "ids": [bos["id"]], "tokens": ["[BOS]"]}},
    }
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    return out


@pytest.fixture(scope="module")
def served(bos_dir: Path) -> Iterator[LiveServer]:
    with running_server(server_settings(str(bos_dir), served_model_name="kimi")) as live:
        yield live


@pytest.fixture(scope="module")
def hf(bos_dir: Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_file=str(bos_dir / "tokenizer.json"))


def _post(live: LiveServer, path: str, body: dict) -> dict:
    answer = httpx.post(live.url + path, json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_fixture_tokenizer_adds_a_bos(hf: PreTrainedTokenizerFast) -> None:
    with_bos = hf.encode(TEXT)
    assert with_bos[0] == hf.convert_tokens_to_ids("[BOS]")
    assert with_bos[1:] == hf.encode(TEXT, add_special_tokens=False)


def test_completions_add_the_bos_by_default_as_vllm(
    served: LiveServer, hf: PreTrainedTokenizerFast
) -> None:
    ids = _post(served, "/tokenize", {"model": "kimi", "prompt": TEXT})["tokens"]
    assert ids == hf.encode(TEXT)  # /tokenize: add_special_tokens defaults to true
    body = {"model": "kimi", "prompt": TEXT, "max_tokens": 1, "temperature": 0}
    default = _post(served, "/v1/completions", body)
    assert default["usage"]["prompt_tokens"] == len(ids)
    without = _post(served, "/v1/completions", {**body, "add_special_tokens": False})
    assert without["usage"]["prompt_tokens"] == len(ids) - 1
    # Echo with logprobs scores what was fed, BOS first (null, as vLLM answers it); the echoed
    # text is the prompt as sent.
    echoed = _post(served, "/v1/completions", {**body, "echo": True, "logprobs": 0})
    logprobs = echoed["choices"][0]["logprobs"]
    assert logprobs["tokens"][0] == "[BOS]" and logprobs["token_logprobs"][0] is None
    assert len(logprobs["tokens"]) == len(ids) + 1
    assert echoed["choices"][0]["text"].startswith(TEXT)
    # Token ids are fed as sent, never wrapped.
    as_ids = _post(served, "/v1/completions", {**body, "prompt": ids[1:]})
    assert as_ids["usage"]["prompt_tokens"] == len(ids) - 1


def test_generate_text_is_the_same_prompt_as_its_tokenized_ids(
    served: LiveServer, hf: PreTrainedTokenizerFast
) -> None:
    """SGLang's /generate encodes text with the tokenizer's special tokens: the same ids as
    /tokenize gives, so the text and the ids share their prefix-cache pages."""
    assert httpx.post(served.url + "/flush_cache", timeout=60).status_code == 200
    params = {"max_new_tokens": 3, "temperature": 0}
    by_text = _post(served, "/generate", {"text": TEXT, "sampling_params": params})
    ids = hf.encode(TEXT)
    assert by_text["meta_info"]["prompt_tokens"] == len(ids)
    by_ids = _post(served, "/generate", {"input_ids": ids, "sampling_params": params})
    assert by_ids["meta_info"]["prompt_tokens"] == len(ids)
    assert by_ids["meta_info"]["cached_tokens"] > 0  # the text's pages, hit by its ids
    assert by_ids["output_ids"] == by_text["output_ids"]


def test_chat_adds_none_unless_asked(served: LiveServer) -> None:
    tokenized = _post(served, "/tokenize", {"model": "kimi", "messages": MESSAGES})
    body = {"model": "kimi", "messages": MESSAGES, "max_tokens": 1, "temperature": 0}
    default = _post(served, "/v1/chat/completions", body)
    assert default["usage"]["prompt_tokens"] == tokenized["count"]
    asked = _post(served, "/v1/chat/completions", {**body, "add_special_tokens": True})
    assert asked["usage"]["prompt_tokens"] == tokenized["count"] + 1
    wrapped = _post(
        served, "/tokenize", {"model": "kimi", "messages": MESSAGES, "add_special_tokens": True}
    )
    assert wrapped["count"] == tokenized["count"] + 1
