"""vLLM's request fields that change the output, honoured on the model server rather than
accepted and ignored: ``allowed_token_ids``, ``bad_words``, chat's ``continue_final_message``
and ``add_generation_prompt`` (read as ``/tokenize`` reads them, so both count the same prompt),
and ``truncate_prompt_tokens``."""

from __future__ import annotations

import httpx
import pytest

from tests.models.server.live import LiveServer, bad_request

PROMPT = "Once upon a time there was a"
QUIET = {"chat_template_kwargs": {"enable_thinking": False}}


def _post(live: LiveServer, path: str, body: dict) -> dict:
    reply = httpx.post(live.url + path, json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _completion(live: LiveServer, **body: object) -> dict:
    body = {"prompt": PROMPT, "max_tokens": 10, "ignore_eos": True, "logprobs": 0, **body}
    return _post(live, "/v1/completions", body)["choices"][0]


def _texts(live: LiveServer, ids: list[int]) -> list[str]:
    served = live.state.served
    assert served is not None
    return [served.tokenizer.token_bytes[i].decode("utf-8", "replace") for i in ids]


def test_allowed_token_ids_are_the_only_ones_sampled(kimi: LiveServer) -> None:
    served = kimi.state.served
    assert served is not None
    allowed = served.tokenizer.encode(" cat dog sat")
    texts = set(_texts(kimi, allowed))
    for seed in (1, 2):
        choice = _completion(kimi, temperature=1.0, seed=seed, allowed_token_ids=allowed)
        assert set(choice["logprobs"]["tokens"]) <= texts and choice["logprobs"]["tokens"]
    messages = [{"role": "user", "content": "Tell me a story."}]
    chat = _post(
        kimi,
        "/v1/chat/completions",
        {"messages": messages, "max_tokens": 6, "ignore_eos": True, "logprobs": True, "seed": 3}
        | {"allowed_token_ids": allowed}
        | QUIET,
    )
    tokens = [entry["token"] for entry in chat["choices"][0]["logprobs"]["content"]]
    assert tokens and set(tokens) <= texts


@pytest.mark.parametrize(
    ("value", "words"),
    [([], "a non-empty array of token ids"), ([3, -1], "a token id"), ([10**7], "below the")],
)
def test_bad_allowed_token_ids_are_a_400_naming_the_field(
    kimi: LiveServer, value: list, words: str
) -> None:
    body = {"prompt": PROMPT, "max_tokens": 2, "allowed_token_ids": value}
    error = bad_request(httpx.post(kimi.url + "/v1/completions", json=body, timeout=60))
    assert error["param"].startswith("allowed_token_ids") and words in error["message"]


def test_bad_words_never_appear_as_their_tokens(kimi: LiveServer) -> None:
    served = kimi.state.served
    assert served is not None
    greedy = _completion(kimi, temperature=0)
    words = greedy["text"].split()
    assert len(words) >= 2, greedy["text"]
    banned = [words[0], words[1]]
    choice = _completion(kimi, temperature=0, bad_words=banned)
    assert choice["text"] != greedy["text"]
    tokens = choice["logprobs"]["tokens"]
    for word in banned:
        for text in (word, " " + word):
            sequence = _texts(kimi, served.tokenizer.encode(text))
            n = len(sequence)
            assert all(tokens[i : i + n] != sequence for i in range(len(tokens) - n + 1))
    error = bad_request(
        httpx.post(
            kimi.url + "/v1/completions", json={"prompt": PROMPT, "bad_words": [" "]}, timeout=60
        )
    )
    assert error["param"].startswith("bad_words")


def test_continue_final_message_and_add_generation_prompt_agree_with_tokenize(
    kimi: LiveServer,
) -> None:
    messages = [
        {"role": "user", "content": "Write a short story about a cat."},
        {"role": "assistant", "content": "Once upon"},
    ]
    for flags in (
        {"add_generation_prompt": False, "continue_final_message": True},
        {"continue_final_message": True},  # the generation prompt goes with it
        {"add_generation_prompt": False},
        {},
    ):
        counted = _post(kimi, "/tokenize", {"messages": messages, **flags, **QUIET})["count"]
        body = {"messages": messages, "max_tokens": 3, "temperature": 0, **flags, **QUIET}
        usage = _post(kimi, "/v1/chat/completions", body)["usage"]
        assert usage["prompt_tokens"] == counted, flags
    plain = _post(kimi, "/tokenize", {"messages": messages, **QUIET})["count"]
    cont = _post(kimi, "/tokenize", {"messages": messages, "continue_final_message": True})
    assert cont["count"] != plain
    both = {"messages": messages, "continue_final_message": True, "add_generation_prompt": True}
    error = bad_request(httpx.post(kimi.url + "/v1/chat/completions", json=both, timeout=60))
    assert error["param"] == "continue_final_message"


def test_truncate_prompt_tokens_feeds_the_prompts_last_tokens(kimi: LiveServer) -> None:
    served = kimi.state.served
    assert served is not None
    ids = served.tokenizer.with_special_tokens(served.tokenizer.encode(PROMPT))
    cut = _post(
        kimi,
        "/v1/completions",
        {"prompt": PROMPT, "max_tokens": 6, "temperature": 0, "truncate_prompt_tokens": 4},
    )
    tail = _post(kimi, "/v1/completions", {"prompt": ids[-4:], "max_tokens": 6, "temperature": 0})
    assert cut["usage"]["prompt_tokens"] == 4
    assert cut["choices"][0]["text"] == tail["choices"][0]["text"]
    whole = _post(kimi, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1, "temperature": 0})
    assert whole["usage"]["prompt_tokens"] == len(ids) > 4
    kept = _post(
        kimi, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1, "truncate_prompt_tokens": -1}
    )
    assert kept["usage"]["prompt_tokens"] == len(ids)  # -1: the context length's worth
    chat = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1, **QUIET}
    usage = _post(kimi, "/v1/chat/completions", {**chat, "truncate_prompt_tokens": 5})["usage"]
    assert usage["prompt_tokens"] == 5
    for value, words in ((0, "an integer >= 1"), (10**6, "at most the context length")):
        body = {"prompt": PROMPT, "truncate_prompt_tokens": value}
        error = bad_request(httpx.post(kimi.url + "/v1/completions", json=body, timeout=60))
        assert error["param"] == "truncate_prompt_tokens" and words in error["message"]
