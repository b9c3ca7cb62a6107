"""``ember dev`` applies the whole config on reload, as ``wrangler dev`` does: a binding's
HTTP routes (the AI APIs) come and go with its section, and the bindings table is printed again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.cli.devprocess import DevProcess, until

WORKER = """
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("Hello from the worker")
"""
READER = """
from workers import Response

async def on_fetch(request, env):
    return Response(str(len(await request.bytes())))
"""
CONFIG = "name: app\nmain: worker.py\nvars:\n  GREETING: Hello\n"
AI = "ai:\n  binding: AI\n"


def _reaches_worker(url: str) -> bool:
    response = httpx.get(url, timeout=10)
    return response.status_code == 200 and response.text == "Hello from the worker"


def _answers_models(url: str) -> bool:
    response = httpx.get(url, timeout=10)
    return response.headers.get("content-type", "").startswith("application/json") and (
        "data" in response.json()
    )


def test_adding_and_removing_ai_applies_its_http_api_and_reprints_bindings(
    tmp_path: Path,
) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(WORKER)
    (project / "ember.yaml").write_text(CONFIG)
    with DevProcess(project, state=tmp_path / "state") as dev:
        models = f"{dev.url}/ai/v1/models"
        rest = f"{dev.url}/client/v4/accounts/local/ai/models/search"
        assert _reaches_worker(models) and _reaches_worker(rest)
        printed = sum("Your worker has access to" in line for line in dev.lines)

        (project / "ember.yaml").write_text(CONFIG + AI)
        until(lambda: _answers_models(models), timeout=20)
        assert not _reaches_worker(rest)
        until(
            lambda: sum("Your worker has access to" in ln for ln in dev.lines) > printed, timeout=20
        )
        dev.wait_for_line("env.AI")

        (project / "ember.yaml").write_text(CONFIG)
        until(lambda: _reaches_worker(models), timeout=20)
        assert _reaches_worker(rest)


def test_a_body_over_the_limit_is_logged_and_names_the_limit(tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(READER)
    (project / "ember.yaml").write_text(CONFIG + "limits:\n  max_request_mb: 1\n")

    def chunked() -> Iterator[bytes]:
        for _ in range(32):
            yield b"z" * 65536

    with DevProcess(project, state=tmp_path / "state") as dev:
        declared = httpx.post(f"{dev.url}/upload", content=b"a" * (2 << 20), timeout=30)
        dev.wait_for_line("POST /upload 413")
        streamed = httpx.post(f"{dev.url}/streamed", content=chunked(), timeout=30)
        dev.wait_for_line("POST /streamed 413")
    for response in (declared, streamed):
        assert response.status_code == 413
        assert "1 MiB" in response.text and "1,048,576 bytes" in response.text, response.text


def test_a_changed_ai_section_reaches_the_ai_http_api_too(tmp_path: Path) -> None:
    """Before any env.AI call: the REST/OpenAI routes adopt the reloaded ``ai`` section."""
    checkpoint = Path(__file__).resolve().parents[2] / "ember/models/checkpoints/glm4moe-tiny"
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(WORKER)

    def write(replicas: int) -> None:
        models = f'    "@cf/zai-org/glm-4.7-flash":\n      checkpoint: "{checkpoint}"\n'
        models += f"      replicas: {replicas}\n"
        (project / "ember.yaml").write_text(f"{CONFIG}{AI}  models:\n{models}")

    def replicas(url: str) -> int:
        rows = httpx.get(f"{url}/ai/v1/models", timeout=10).json()["data"]
        row = next(r for r in rows if r["id"] == "@cf/zai-org/glm-4.7-flash")
        return len(row["replicas"])

    write(1)
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert replicas(dev.url) == 1
        write(2)
        until(lambda: replicas(dev.url) == 2, timeout=20)
