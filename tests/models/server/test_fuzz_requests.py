"""No request can hurt another: hostile bodies against one real ``ember models serve`` process.

For each endpoint, hypothesis mutates a valid body (``fuzz_bodies``) and sends it while a
well-formed canary chat completion runs on another connection. Every answer must be a 200 or a
4xx naming the field (``fuzz_checks``), streams must end properly, the canary must succeed and
``/health`` stay 200; at the end the engine holds no request. Problems are collected over the
whole run and reported together, each with the exact body to replay.

The run is derandomized (the same examples every time) and small by default;
``EMBER_FUZZ_EXAMPLES=500`` explores further, ``EMBER_FUZZ_SEED=N`` elsewhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ember.models.server.metrics import parse_prometheus
from tests.models.server.fuzz_bodies import (
    CHAT,
    COMPLETIONS,
    EXTREMES,
    GENERATE,
    Hostile,
    base_body,
    dumps,
    hostile_requests,
)
from tests.models.server.fuzz_checks import (
    CLIENT_TIMEOUT,
    canary_problems,
    check_answer,
    fuzz_beside_a_canary,
)
from tests.models.server.served_process import ServedProcess, served_process

EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "30"))
# Other examples than CI's fixed ones, to explore: EMBER_FUZZ_SEED=7.
SEED = int(os.environ["EMBER_FUZZ_SEED"]) if os.environ.get("EMBER_FUZZ_SEED") else None
MODEL = "fuzz"


@pytest.fixture(scope="module")
def server(glm_dir: Path) -> Iterator[ServedProcess]:
    with served_process(glm_dir, MODEL, "--kv-cache-bytes", "8MiB") as served:
        yield served


def _send(client: httpx.Client, url: str, hostile: Hostile) -> list[str]:
    headers = {} if hostile.content_type is None else {"content-type": hostile.content_type}
    try:
        response = client.post(
            url + hostile.path, content=hostile.body, headers=headers, timeout=CLIENT_TIMEOUT
        )
    except httpx.TimeoutException:
        return [f"no answer within {CLIENT_TIMEOUT.read}s"]
    except httpx.HTTPError as exc:
        return [f"the connection failed: {exc!r}"]
    return check_answer(response, hostile)


def _engine_is_empty(url: str) -> bool:
    samples = parse_prometheus(httpx.get(url + "/metrics", timeout=10).text)
    held = ("sglang:num_running_reqs{", "sglang:num_queue_reqs{")
    return not any(value for key, value in samples.items() if key.startswith(held))


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS, GENERATE])
def test_hostile_bodies_hurt_nobody(server: ServedProcess, path: str) -> None:
    def health() -> list[str]:
        ok = httpx.get(server.url + "/health", timeout=10).status_code == 200
        return [] if ok else ["/health is no longer 200"]

    problems = fuzz_beside_a_canary(
        hostile_requests(path, MODEL),
        lambda client, hostile: _send(client, server.url, hostile),
        lambda client: canary_problems(client, server.url),
        Hostile.describe,
        examples=EXAMPLES,
        seed_value=SEED,
        after_each=health,
    )
    deadline = time.monotonic() + 30
    while not _engine_is_empty(server.url) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not _engine_is_empty(server.url):
        problems.append("the engine still holds requests after the run")
    tracebacks = [line for line in server.log if "Traceback" in line or "Error" in line]
    assert not problems, "\n".join(problems + tracebacks[:20])


# Every number knob at every extreme, not left to chance: one such value (top_k 1e308) used to
# fail the engine loop, and with it every request on the server.
KNOBS = {
    COMPLETIONS: [
        "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
        "frequency_penalty", "repetition_penalty", "min_tokens", "max_tokens", "logprobs",
        "prompt_logprobs", "n", "best_of",
    ],
    GENERATE: [
        "sampling_params.temperature", "sampling_params.top_p", "sampling_params.top_k",
        "sampling_params.min_p", "sampling_params.sampling_seed",
        "sampling_params.presence_penalty", "sampling_params.frequency_penalty",
        "sampling_params.repetition_penalty", "sampling_params.min_new_tokens",
        "sampling_params.max_new_tokens", "sampling_params.n", "top_logprobs_num",
        "logprob_start_len",
    ],
}  # fmt: skip


def _extreme(path: str, knob: str, value: float) -> Hostile:
    body = base_body(path, MODEL)
    node = body
    *parents, last = knob.split(".")
    for key in parents:
        node = node[key]
    node[last] = value
    if path == GENERATE and knob == "top_logprobs_num":
        body["return_logprob"] = True
    return Hostile(path, dumps(body).encode(), "application/json", False, (knob,))


@pytest.mark.parametrize("path", [COMPLETIONS, GENERATE])
def test_every_number_knob_at_every_extreme(server: ServedProcess, path: str) -> None:
    problems: list[str] = []
    with ThreadPoolExecutor(2) as pool, httpx.Client() as client, httpx.Client() as other:
        for knob in KNOBS[path]:
            for value in EXTREMES:
                hostile = _extreme(path, knob, value)
                answer = pool.submit(_send, client, server.url, hostile)
                canary = pool.submit(canary_problems, other, server.url)
                found = answer.result() + canary.result()
                problems.extend(f"{hostile.describe()}\n    -> {p}" for p in found)
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200
    assert not problems, "\n".join(problems)
