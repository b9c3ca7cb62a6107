"""A checkpoint's generation_config.json sampling defaults, as vLLM (``--generation-config auto``)
and SGLang (``--sampling-defaults model``) use them: temperature, top_p, top_k, min_p and
repetition_penalty fill the fields a request leaves out, on every route; ``max_new_tokens`` is
the default ``max_tokens`` (vLLM). ``--generation-config vllm`` / ``--sampling-defaults openai``
turn them off, and the server says at start which defaults it uses."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ember.errors import ConfigError
from ember.models.server.settings import ServerSettings
from tests.models.server.live import LiveServer, running_server, server_settings
from tests.models.server.test_launch_flags import _settings_from

PROMPT = "Once upon a time"
# Near-greedy defaults: a request that leaves temperature and top_k out answers greedily.
DEFAULTS = {"do_sample": True, "temperature": 0.01, "top_k": 1, "max_new_tokens": 5}


def _with_defaults(source: Path, target: Path, values: dict) -> Path:
    shutil.copytree(source, target)
    path = target / "generation_config.json"
    config = json.loads(path.read_text())
    config.update(values)
    path.write_text(json.dumps(config))
    return target


@pytest.fixture(scope="module")
def gencfg_dir(kimi_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _with_defaults(kimi_dir, tmp_path_factory.mktemp("gencfg") / "kimi-gencfg", DEFAULTS)


@pytest.fixture(scope="module")
def served(gencfg_dir: Path) -> Iterator[tuple[LiveServer, str]]:
    log = io.StringIO()
    with running_server(server_settings(str(gencfg_dir)), log=log) as live:
        yield live, log.getvalue()


@pytest.fixture(scope="module")
def plain(gencfg_dir: Path) -> Iterator[LiveServer]:
    settings = server_settings(str(gencfg_dir), sampling_defaults="openai")
    with running_server(settings) as live:
        yield live


def _completion(url: str, **body: object) -> str:
    body = {"prompt": PROMPT, "max_tokens": 12, "ignore_eos": True, **body}
    answer = httpx.post(url + "/v1/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["text"]


def _chat(url: str, **body: object) -> dict:
    body = {"messages": [{"role": "user", "content": PROMPT}], "ignore_eos": True, **body}
    answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _generate(url: str, **params: object) -> list[int]:
    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": 12, "ignore_eos": True, **params}}
    answer = httpx.post(url + "/generate", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["output_ids"]


def test_requests_that_leave_the_fields_out_take_the_checkpoints_defaults(served) -> None:
    live, _ = served
    greedy = _completion(live.url, temperature=0)
    assert {_completion(live.url, seed=seed) for seed in (1, 2, 3)} == {greedy}
    ids = _generate(live.url, temperature=0)
    assert all(_generate(live.url, sampling_seed=seed) == ids for seed in (1, 2, 3))
    content = _chat(live.url, temperature=0, max_tokens=8)["choices"][0]["message"]
    sampled = [_chat(live.url, seed=s, max_tokens=8)["choices"][0]["message"] for s in (1, 2)]
    assert sampled == [content, content]


def test_the_responses_api_samples_and_shows_them(served) -> None:
    live, _ = served
    body = {"input": PROMPT, "max_output_tokens": 6, "reasoning": {"effort": "none"}}
    reply = httpx.post(live.url + "/v1/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    assert reply.json()["temperature"] == DEFAULTS["temperature"]
    assert reply.json()["top_p"] == 1.0
    mine = httpx.post(live.url + "/v1/responses", json={**body, "temperature": 0.5}, timeout=120)
    assert mine.json()["temperature"] == 0.5


def test_a_field_the_request_sets_wins(served, plain) -> None:
    """temperature 1 and top_k off, sent: sampled as on a server without defaults."""
    live, _ = served
    for seed in (1, 2, 3):
        asked = {"temperature": 1.0, "top_k": -1, "seed": seed}
        assert _completion(live.url, **asked) == _completion(plain.url, **asked)


def test_max_new_tokens_is_the_default_max_tokens(served) -> None:
    live, _ = served
    usage = _chat(live.url, temperature=0)["usage"]
    assert usage["completion_tokens"] == DEFAULTS["max_new_tokens"]
    assert _chat(live.url, temperature=0, max_tokens=7)["usage"]["completion_tokens"] == 7


def test_the_flag_turns_them_off(plain) -> None:
    """--sampling-defaults openai: a request without temperature samples at 1.0."""
    for seed in (1, 2, 3):
        assert _completion(plain.url, seed=seed) == _completion(
            plain.url, seed=seed, temperature=1.0
        )
    assert _chat(plain.url, temperature=0, max_tokens=7)["usage"]["completion_tokens"] == 7


def test_the_defaults_in_use_are_logged_at_start(served) -> None:
    _, log = served
    assert "Default sampling parameters have been overridden by the model's" in log
    assert "--generation-config vllm" in log and "--sampling-defaults openai" in log
    assert "temperature=0.01" in log and "top_k=1" in log and "max_tokens=5" in log


def test_vllm_and_sglang_spellings_of_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _settings_from([], monkeypatch).sampling_defaults == "model"
    for args in (["--generation-config", "vllm"], ["--sampling-defaults", "openai"]):
        assert _settings_from(args, monkeypatch).sampling_defaults == "openai"
    for args in (["--generation-config", "auto"], ["--sampling-defaults", "model"]):
        assert _settings_from(args, monkeypatch).sampling_defaults == "model"
    with pytest.raises(ConfigError, match="--sampling-defaults: expected model or openai"):
        ServerSettings(model="m", sampling_defaults="greedy")  # type: ignore[arg-type]


def test_a_default_out_of_range_is_refused_at_start(kimi_dir: Path, tmp_path: Path) -> None:
    """Better a clear start-up error than a 400 on every request that leaves top_p out."""
    bad = _with_defaults(kimi_dir, tmp_path / "bad", {"top_p": 1.5})
    with pytest.raises(ConfigError, match=r"generation_config.json.*top_p"):
        with running_server(server_settings(str(bad))):
            pass


def test_top_k_minus_one_is_off_as_vllm_spells_it(tmp_path: Path) -> None:
    # vLLM and SGLang write "off" as -1 (the AI gateway sends it): a checkpoint saying so loads.
    from ember.models.generation import GenerationConfig
    from ember.models.server.sampling_defaults import SamplingDefaults

    config = GenerationConfig(top_k=-1, temperature=0.7)
    defaults = SamplingDefaults.from_generation(config, tmp_path)
    assert defaults.top_k == 0 and defaults.temperature == 0.7
    with pytest.raises(ConfigError):
        SamplingDefaults.from_generation(GenerationConfig(top_k=-2), tmp_path)
