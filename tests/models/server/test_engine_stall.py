"""A server whose engine is alive but stuck says so on ``/health``, with the reason.

The engine thread of a real ``ember models serve`` process is wedged mid-step by fault injection
(``tests/models/pool/fault_site``: ``LLMEngine.step`` blocks while a file exists, as a deadlock
or a GPU kernel that never returns would). The thread lives and the HTTP loop answers, so only
the engine's progress tells: with work waiting or running and no step finished for
``--health-check-timeout`` seconds, ``/health`` answers 503 naming the stall (so a pool replaces
the server), and ``/health_generate`` refuses at once. An idle engine is never stalled, however
long it idles, and a stall that ends (the step returns) is healthy again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.models.server.served_process import ServedProcess, served_process

MODEL = "glm-stall"
FAULT_SITE = Path(__file__).parents[1] / "pool" / "fault_site"
GUARD_S = 60  # keeps a regression from hanging the suite; never the measure


@pytest.fixture
def wedged(glm_dir: Path, tmp_path: Path) -> Iterator[tuple[ServedProcess, Path]]:
    wedge = tmp_path / "wedge"
    env = {"PYTHONPATH": str(FAULT_SITE), "EMBER_TEST_WEDGE": str(wedge)}
    with served_process(glm_dir, MODEL, "--health-check-timeout", "1", env=env) as served:
        yield served, wedge


def _health(url: str, path: str = "/health") -> httpx.Response:
    return httpx.get(url + path, timeout=GUARD_S)


def test_a_wedged_engine_with_work_fails_health_naming_the_stall(
    wedged: tuple[ServedProcess, Path],
) -> None:
    served, wedge = wedged
    assert _health(served.url).status_code == 200
    wedge.touch()
    answers: list[httpx.Response] = []
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    request = threading.Thread(
        target=lambda: answers.append(
            httpx.post(served.url + "/v1/chat/completions", json=body, timeout=GUARD_S)
        )
    )
    request.start()
    deadline = time.monotonic() + GUARD_S
    while (health := _health(served.url)).status_code == 200:
        assert time.monotonic() < deadline, "/health stayed 200 with a wedged engine"
        time.sleep(0.1)
    assert health.status_code == 503, health
    assert health.json()["status"] == "stalled", health.text
    error = health.json()["error"]
    assert error.startswith("no engine step finished for "), error
    assert error.endswith(
        " s while 0 requests were running and 1 waiting (--health-check-timeout 1 s)"
    ), error
    generate = _health(served.url, "/health_generate")
    assert generate.status_code == 503, generate
    assert "the engine is stalled: no engine step finished" in generate.text, generate.text

    wedge.unlink()  # the step returns: the request completes and the engine is healthy again
    request.join(GUARD_S)
    assert answers and answers[0].status_code == 200, answers
    assert _health(served.url).status_code == 200
    time.sleep(1.5)  # idle past the bound: an engine with nothing to do is not stalled
    assert _health(served.url).status_code == 200
    assert _health(served.url, "/health_generate").status_code == 200
    assert any("warning: the engine is stalled: no engine step" in x for x in served.log)
