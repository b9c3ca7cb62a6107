"""``ember ai run`` when thinking uses up ``--max-tokens`` (the README's small-budget call): one
hint in the CLI's words (``--no-thinking``, ``--max-tokens``), the same through ``--url`` as
with the model started here, and exit 1 with no answer on stdout; ``--json`` prints the result
whole, exits 0, and says the same on stderr. Real ``ember`` processes, the tiny GLM."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.bindings.ai.dev_support import DevServer, ember_env, serve_ai_project
from tests.bindings.ai.support import GLM, models_section, tiny_checkpoints

# Greedy with a small budget: the tiny GLM is still thinking when it runs out (as in
# test_thinking_live.py), so the answer's content is null.
PROMPT = "What is the origin of the phrase Hello, World?"
SMALL = ["--max-tokens", "20", "--temperature", "0"]
HINT = "pass --no-thinking, or raise --max-tokens"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-budget")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("local-budget")
    config = {
        "name": "b",
        "main": "worker.py",
        "ai": {"binding": "AI", "models": models_section(glm)},
    }
    (root / "ember.yaml").write_text(yaml.safe_dump(config))
    (root / "worker.py").write_text("x = 1\n")
    return root


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ember", "ai", "run", GLM, PROMPT, *SMALL, *args]
    return subprocess.run(command, capture_output=True, text=True, env=ember_env(), timeout=300)


def _where(kind: str, dev: DevServer, project: Path) -> list[str]:
    return ["--url", dev.url] if kind == "url" else ["--project", str(project)]


@pytest.mark.parametrize("kind", ["url", "local"])
@pytest.mark.parametrize("stream", [False, True])
def test_thinking_that_uses_up_the_budget_says_which_flags_help(
    dev: DevServer, project: Path, kind: str, stream: bool
) -> None:
    ran = _run(*_where(kind, dev, project), *(["--stream"] if stream else []))
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert ran.stdout.strip() == ""
    error = ran.stderr.strip().splitlines()[-1]
    assert error.startswith(f"ember: error: no answer: {GLM} spent all 20 tokens of --max-tokens")
    assert error.endswith(HINT)
    # The worker's field names are not the CLI user's: none of the gateway's note reaches them.
    assert "max_completion_tokens" not in ran.stderr and "chat_template_kwargs" not in ran.stderr


@pytest.mark.parametrize("kind", ["url", "local"])
def test_json_keeps_the_result_and_exits_zero(dev: DevServer, project: Path, kind: str) -> None:
    ran = _run(*_where(kind, dev, project), "--json")
    assert ran.returncode == 0, ran.stderr
    choice = json.loads(ran.stdout)["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] is None
    assert HINT in ran.stderr


def test_an_answer_within_the_budget_is_not_a_failure(dev: DevServer) -> None:
    ran = _run("--url", dev.url, "--no-thinking")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() and HINT not in ran.stderr
