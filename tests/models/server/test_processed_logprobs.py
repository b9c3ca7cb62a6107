"""SGLang's ``/generate`` reports the logprobs of the distribution it samples from: the logits
after ``logit_bias`` and the penalties, divided by the temperature (a greedy request's at 1),
unless ``SGLANG_RETURN_ORIGINAL_LOGPROB``; the OpenAI routes keep vLLM's default, the raw
model's. Both against a slow reference built from the model's own forward, step by step, on
random prompts."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from tests.models.server.live import LiveServer, running_server, server_settings

BIAS = {"17": 3.0, "40": -2.0}


@pytest.fixture(scope="module")
def exact(glm_dir: Path) -> Iterator[LiveServer]:
    settings = server_settings(str(glm_dir), served_model_name="glm", dtype="float32")
    with running_server(settings) as live:
        yield live


def _reference(live: LiveServer, prompt: list[int], out: list[int]) -> list[torch.Tensor]:
    """The model's raw next-token logits before each output token (float64)."""
    served = live.state.served
    assert served is not None
    rows = []
    with torch.inference_mode():
        logits = served.llm.runner.model.reference_forward(torch.tensor([prompt + out]))  # type: ignore[attr-defined]
    for step in range(len(out)):
        rows.append(logits[0, len(prompt) - 1 + step].double())
    return rows


def _processed(row: torch.Tensor, seen: set[int], temperature: float, rep: float) -> torch.Tensor:
    row = row.clone()
    for token, bias in BIAS.items():
        row[int(token)] += bias
    for token in seen:  # repetition penalty over the prompt and the output so far
        row[token] = row[token] / rep if row[token] > 0 else row[token] * rep
    return torch.log_softmax(row / (temperature or 1.0), dim=-1)


@pytest.mark.parametrize(("seed", "temperature"), [(1, 0.5), (2, 1.7), (3, 0.0)])
def test_generate_logprobs_are_of_the_processed_distribution(
    exact: LiveServer, seed: int, temperature: float
) -> None:
    rng = random.Random(seed)
    prompt = [rng.randrange(10, 4000) for _ in range(rng.randrange(5, 40))]
    params = {
        "temperature": temperature,
        "repetition_penalty": 1.3,
        "max_new_tokens": 6,
        "sampling_seed": seed,
        "ignore_eos": True,
    }
    body = {"input_ids": prompt, "sampling_params": {**params}, "return_logprob": True}
    body["sampling_params"]["logit_bias"] = BIAS
    body["top_logprobs_num"] = 3
    reply = httpx.post(exact.url + "/generate", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    meta = reply.json()["meta_info"]
    out = reply.json()["output_ids"]
    rows = _reference(exact, prompt, out)
    for step, (entry, top) in enumerate(
        zip(meta["output_token_logprobs"], meta["output_top_logprobs"], strict=True)
    ):
        want = _processed(rows[step], set(prompt + out[:step]), temperature, 1.3)
        raw = torch.log_softmax(rows[step], dim=-1)
        token = out[step]
        assert entry[1] == token
        assert abs(entry[0] - want[token].item()) < 1e-3, (step, entry[0], want[token].item())
        assert abs(want[token].item() - raw[token].item()) > 1e-3  # the test can tell them apart
        values, ids = torch.topk(want, 3)
        assert [t[1] for t in top] == ids.tolist()
        assert all(abs(t[0] - v) < 1e-3 for t, v in zip(top, values.tolist(), strict=True))


def test_openai_routes_keep_the_raw_logprobs(exact: LiveServer) -> None:
    """The same request on /v1/completions samples the same tokens (same seed, same sampler):
    their logprobs are the raw model's, as vLLM's default logprobs_mode."""
    prompt = [random.Random(9).randrange(10, 4000) for _ in range(20)]
    sampling = {"temperature": 0.5, "seed": 4, "logit_bias": BIAS, "ignore_eos": True}
    body = {"prompt": prompt, "max_tokens": 4, "logprobs": 1, **sampling}
    reply = httpx.post(exact.url + "/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    params = {**sampling, "max_new_tokens": 4}
    native = httpx.post(
        exact.url + "/generate", json={"input_ids": prompt, "sampling_params": params}, timeout=120
    ).json()
    assert native["text"] == choice["text"]
    out = native["output_ids"]
    rows = _reference(exact, prompt, out)
    for step, value in enumerate(choice["logprobs"]["token_logprobs"]):
        raw = torch.log_softmax(rows[step], dim=-1)[out[step]].item()
        assert abs(value - raw) < 1e-3


@pytest.fixture(scope="module")
def processed(glm_dir: Path) -> Iterator[LiveServer]:
    settings = server_settings(
        str(glm_dir), served_model_name="glm", dtype="float32", logprobs_mode="processed_logprobs"
    )
    with running_server(settings) as live:
        yield live


def test_vllm_processed_logprobs_mode_reports_the_distribution_drawn_from(
    processed: LiveServer,
) -> None:
    """--logprobs-mode processed_logprobs: after bias, penalties, temperature and the top-k
    cut; a token the cut dropped is -inf (on the wire: the clamped floor)."""
    prompt = [random.Random(5).randrange(10, 4000) for _ in range(12)]
    sampling = {"temperature": 0.7, "top_k": 3, "seed": 8, "logit_bias": BIAS, "ignore_eos": True}
    body = {"prompt": prompt, "max_tokens": 4, "logprobs": 5, **sampling}
    reply = httpx.post(processed.url + "/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    logprobs = reply.json()["choices"][0]["logprobs"]
    params = {**sampling, "max_new_tokens": 4}
    out = httpx.post(
        processed.url + "/generate",
        json={"input_ids": prompt, "sampling_params": params},
        timeout=120,
    ).json()["output_ids"]
    rows = _reference(processed, prompt, out)
    for step, value in enumerate(logprobs["token_logprobs"]):
        row = _processed(rows[step], set(), 0.7, 1.0)  # bias and temperature, no penalty
        kept = torch.topk(row, 3).indices
        want = torch.log_softmax(row[kept], dim=-1)
        assert out[step] in kept.tolist()
        assert abs(value - want[kept.tolist().index(out[step])].item()) < 1e-3
        floor = sorted(logprobs["top_logprobs"][step].values())[:2]
        assert all(v <= -9999 for v in floor)  # two of five alternatives were cut


def test_the_flag_takes_vllms_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from ember.cli.main import cli
    from tests.models.server.test_launch_flags import _settings_from

    assert _settings_from([], monkeypatch).logprobs_mode == "raw_logprobs"
    chosen = _settings_from(["--logprobs-mode", "processed_logprobs"], monkeypatch)
    assert chosen.logprobs_mode == "processed_logprobs"
    result = CliRunner().invoke(cli, ["models", "serve", "m", "--logprobs-mode", "raw_logits"])
    assert result.exit_code == 2 and "--logprobs-mode" in result.output
