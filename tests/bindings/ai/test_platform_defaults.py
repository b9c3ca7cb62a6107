"""The AI gateway keeps the platform's sampling defaults: a replica (ember's model server, or
SGLang, both of which now fill what a request leaves out from the checkpoint's
generation_config.json) always gets the Workers AI schema's default for the model's id, so a
worker that leaves ``temperature`` out samples as it would on the platform."""

from __future__ import annotations

import pytest

from ember.bindings.ai.classic import classic_inputs
from ember.bindings.ai.dialects import upstream_request
from ember.bindings.ai.fields import platform_sampling_defaults

GLM = "@cf/zai-org/glm-4.7-flash"
LLAMA = "@cf/meta/llama-3.1-8b-instruct"
FAMILY_B = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}


@pytest.mark.parametrize("dialect", ["workers", "openai"])
def test_what_a_worker_leaves_out_is_sent_as_the_platforms_default(dialect: str) -> None:
    inputs = {"messages": [{"role": "user", "content": "hi"}], "model": GLM}
    body = upstream_request(GLM, inputs, dialect, stream=False).body  # type: ignore[arg-type]
    assert {key: body.get(key) for key in FAMILY_B} == FAMILY_B
    mine = {**inputs, "temperature": 0.2, "top_k": 5}
    body = upstream_request(GLM, mine, dialect, stream=False).body  # type: ignore[arg-type]
    assert body["temperature"] == 0.2 and body["top_k"] == 5 and body["top_p"] == 1.0


def test_a_raw_prompt_gets_them_too() -> None:
    upstream = upstream_request(GLM, {"prompt": "hi", "raw": True}, "workers", stream=False)
    assert upstream.raw and upstream.body["temperature"] == 1.0 and upstream.body["top_k"] == -1


def test_a_classic_id_keeps_its_own_temperature() -> None:
    defaults = platform_sampling_defaults(classic=True)
    assert defaults["temperature"] == 0.6
    body = upstream_request(
        LLAMA, classic_inputs({"prompt": "hi"}), "workers", stream=False, defaults=defaults
    ).body
    assert body["temperature"] == 0.6 and body["top_p"] == 1.0


@pytest.mark.parametrize("raw", [False, True])
def test_top_p_zero_reaches_the_replica_as_top_k_one(raw: bool) -> None:
    """ember reads ``top_p: 0`` as "only the most likely token"; SGLang and vLLM refuse it
    (top_p must be in (0, 1]), so an SGLang replica gets the same choice as ``top_k: 1``."""
    inputs = {"prompt": "hi", "raw": raw, "top_p": 0, "top_k": 7, "temperature": 0.7}
    body = upstream_request(GLM, inputs, "workers", stream=False).body
    assert (body["top_p"], body["top_k"], body["temperature"]) == (1.0, 1, 0.7)
    kept = upstream_request(GLM, {**inputs, "top_p": 0.5}, "workers", stream=False).body
    assert (kept["top_p"], kept["top_k"]) == (0.5, 7)
