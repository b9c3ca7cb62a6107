"""Values SGLang's ``/generate`` serves in ``sampling_params`` that ember refused: an empty stop
string, ``stop_regex`` (a string or a list), ``ignore_eos: 0``, ``stream_interval: 1.0``.
SGLang builds its SamplingParams from the JSON without checking types (a msgspec Struct's
constructor), so a flag is read by truth and a number by value; what SGLang fails on (a regex
that does not compile) stays a 400 naming the field."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.models.server.live import LiveServer, bad_request

PROMPT = "def f("


def _generate(server: LiveServer, **params: object) -> dict:
    body = {"text": PROMPT, "sampling_params": {"temperature": 0, **params}}
    answer = httpx.post(server.url + "/generate", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_empty_stop_string_ends_the_output_after_one_token_untrimmed(
    kimi: LiveServer,
) -> None:
    # SGLang: "" is in every text, so the first token's check matches it; its trim skips an
    # empty match, so that token's text stays.
    one = _generate(kimi, max_new_tokens=1, ignore_eos=True)
    stopped = _generate(kimi, max_new_tokens=8, ignore_eos=True, stop="")
    assert stopped["meta_info"]["completion_tokens"] == 1
    assert stopped["text"] == one["text"]
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": ""}
    # ember's min_new_tokens rule: stop strings match from the min_new_tokens-th token on.
    later = _generate(kimi, max_new_tokens=8, ignore_eos=True, stop=[""], min_new_tokens=3)
    assert later["meta_info"]["completion_tokens"] == 3


def _first_char(text: str) -> str:
    return next(ch for ch in text[1:] if not ch.isspace())


@pytest.mark.parametrize("as_list", [False, True])
def test_stop_regex_ends_the_output_at_the_first_match(kimi: LiveServer, as_list: bool) -> None:
    free = _generate(kimi, max_new_tokens=12, ignore_eos=True)["text"]
    pattern = "[" + re.escape(_first_char(free)) + "]"  # its own text is not in the output
    regex: object = ["never{3}x", pattern] if as_list else pattern
    stopped = _generate(kimi, max_new_tokens=12, ignore_eos=True, stop_regex=regex)
    count = stopped["meta_info"]["completion_tokens"]
    shorter = _generate(kimi, max_new_tokens=count - 1, ignore_eos=True)["text"]
    # SGLang leaves the matched text in (it trims only where the pattern's own text is found).
    assert free.startswith(stopped["text"]) and re.search(pattern, stopped["text"])
    assert re.search(pattern, shorter) is None  # the first token after which it matched
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": pattern}
    # A pattern that is its own text (a letter): SGLang cuts there; a stream shows the same.
    literal = next(ch for ch in free if ch.isascii() and ch.isalnum())
    body = {
        "text": PROMPT,
        "stream": True,
        "sampling_params": {"temperature": 0, "max_new_tokens": 12, "stop_regex": literal},
    }
    streamed = httpx.post(kimi.url + "/generate", json=body, timeout=60)
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    last = httpx.Response(200, content=events[-2]).json()
    cut = _generate(kimi, max_new_tokens=12, stop_regex=literal)["text"]
    assert last["text"] == cut and literal not in cut and free.startswith(cut)


@pytest.mark.parametrize("value", ["(", 5, ["a", "[z-a]"]])
def test_a_stop_regex_sglang_cannot_use_is_a_400_naming_it(kimi: LiveServer, value: object) -> None:
    body = {"text": "a", "sampling_params": {"stop_regex": value}}
    error = bad_request(httpx.post(kimi.url + "/generate", json=body, timeout=60))
    assert error["param"].startswith("sampling_params.stop_regex"), error
    assert "regular expression" in error["message"], error


def test_flags_are_read_as_sglang_reads_them(kimi: LiveServer) -> None:
    for zero in (0, False):
        assert _generate(kimi, max_new_tokens=4, ignore_eos=zero)["text"] is not None
    ran = _generate(kimi, max_new_tokens=6, ignore_eos=1)["meta_info"]
    assert ran["completion_tokens"] == 6 and ran["finish_reason"]["type"] == "length"
    kept = _generate(kimi, max_new_tokens=2, skip_special_tokens=0, no_stop_trim=1)
    assert kept["meta_info"]["completion_tokens"] <= 2
    body = {"text": "a", "sampling_params": {"ignore_eos": "yes"}}
    error = bad_request(httpx.post(kimi.url + "/generate", json=body, timeout=60))
    assert error["param"] == "sampling_params.ignore_eos" and "0 or 1" in error["message"]


@pytest.mark.parametrize("interval", [1.0, True, 0, False])
def test_a_stream_interval_of_every_step_streams(kimi: LiveServer, interval: object) -> None:
    # SGLang: ``stream_interval or the server's`` (1), then ``len(output_ids) % interval``.
    body = {
        "text": PROMPT,
        "stream": True,
        "sampling_params": {"max_new_tokens": 3, "stream_interval": interval},
    }
    answer = httpx.post(kimi.url + "/generate", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize(
    ("value", "param", "construct"),
    [
        ("(?=a)b", "sampling_params.stop_regex", "lookahead"),
        (["ok", r"(a)\1"], "sampling_params.stop_regex.[1]", "backreference"),
    ],
)
def test_a_stop_regex_outside_embers_dialect_is_a_400_naming_it(
    kimi: LiveServer, value: object, param: str, construct: str
) -> None:
    body = {"text": "a", "sampling_params": {"stop_regex": value}}
    error = bad_request(httpx.post(kimi.url + "/generate", json=body, timeout=60))
    assert error["param"] == param, error
    assert construct in error["message"] and "no backreferences, lookaround" in error["message"]


def test_a_backtracking_stop_regex_on_a_run_of_its_letter_does_not_stall_the_engine(
    kimi: LiveServer,
) -> None:
    # The regex constraint makes the output a run of "a" (what logit_bias or a prompt can do
    # too). Python's re searching (a+)+b in it backtracks 2**n steps: the old engine never
    # finished this request, nor any other tenant's. The automaton steps each character once.
    stop = ["(a+)+b", "(x+x+)+y", "^(a|aa)+c"]
    answer = _generate(kimi, max_new_tokens=48, regex="a{40}", stop_regex=stop)
    assert answer["text"] == "a" * 40
    assert answer["meta_info"]["finish_reason"]["type"] != "stop" or (
        answer["meta_info"]["finish_reason"].get("matched") not in stop
    )
    # The same output with a pattern that matches it stops at the first token, match kept.
    stopped = _generate(kimi, max_new_tokens=48, regex="a{40}", stop_regex="(a+)+$")
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": "(a+)+$"}
    assert stopped["meta_info"]["completion_tokens"] == 1 and stopped["text"].strip("a") == ""
