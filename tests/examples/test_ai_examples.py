"""examples/hello-ai and examples/ai-chat under the real ``ember dev``; ai-chat in headless
Chromium, used as a person would: type a question, press Send, watch the answer stream in.

Until the shipped tiny checkpoints are built, the examples run on random-init stand-ins with the
same config and tokenizer: the test copies the example and points the id at the stand-in.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ember.models.api.sse import parse_sse
from ember.models.catalog import default_catalog
from tests.bindings.ai.support import GLM, SMALL_SERVER, tiny_checkpoints
from tests.cli.devprocess import ROOT, DevProcess
from tests.examples.cdp import Browser, chromium_path

EXAMPLES = ROOT / "examples"


def _project(name: str, tmp_path: Path, factory: pytest.TempPathFactory) -> Path:
    """The example as shipped; with a stand-in checkpoint while the real one is not built."""
    project = tmp_path / name
    shutil.copytree(EXAMPLES / name, project)
    config = yaml.safe_load((project / "ember.yaml").read_text())
    assert config["ai"] == {"binding": "AI"}  # the example itself needs nothing else
    serving: dict = {"args": SMALL_SERVER}
    if not default_catalog().get(GLM).is_built:
        serving["checkpoint"] = str(tiny_checkpoints(factory)[0])
    config["ai"]["models"] = {GLM: serving}
    (project / "ember.yaml").write_text(yaml.safe_dump(config))
    return project


def test_hello_ai_answers_and_streams(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project = _project("hello-ai", tmp_path, tmp_path_factory)
    with DevProcess(project, state=tmp_path / "state") as dev:
        answer = httpx.get(dev.url, params={"q": "What is a list?"}, timeout=120)
        assert answer.status_code == 200 and answer.text.endswith("\n")
        dev.wait_for_line("ready in")
        stream = httpx.get(dev.url, params={"q": "And a dict?", "stream": "1"}, timeout=120)
        assert stream.headers["content-type"] == "text/event-stream"
        events = parse_sse(stream.content)
        assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] > 0


def test_ai_chat_shows_an_ai_error_to_the_user(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project = _project("ai-chat", tmp_path, tmp_path_factory)
    with DevProcess(project, state=tmp_path / "state") as dev:
        # An input the platform refuses (5006), so no model has to load for the error.
        ask = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}
        answer = httpx.post(f"{dev.url}/api/chat", json=ask, timeout=120)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == 5006 and error["retryable"] is False
    assert "max_completion_tokens" in error["message"]


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed")
def test_ai_chat_in_a_browser(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    project = _project("ai-chat", tmp_path, tmp_path_factory)
    with DevProcess(project, state=tmp_path / "state") as dev:
        browser = Browser(tmp_path / "profile")
        try:
            # The answer is sampled (the page sends no seed): one can end within a poll or two,
            # too soon to be seen growing. Up to three questions, each checked in full.
            for _ in range(3):
                streaming, final, state, error = asyncio.run(_chat(browser, dev.url))
                assert not error, final
                assert state == "done" and final
                if len(set(streaming)) > 1:
                    break
        finally:
            browser.close()
    # Text was on the page while the answer was still streaming, and it grew to the final one.
    assert len(set(streaming)) > 1 and final.startswith(streaming[0])


async def _chat(browser: Browser, url: str) -> tuple[list[str], str, str, bool]:
    page, socket = await browser.page()
    try:
        await page.navigate(url)
        assert await page.evaluate("document.title") == "ember ai-chat"
        await page.type("#question", "What does a Python decorator do?")
        await page.click("#send")
        last = ".assistant:last-of-type"
        streaming: list[str] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            state, text = await page.evaluate(
                f"(() => {{ const a = document.querySelector('{last}');"
                " return a ? [a.dataset.state, a.textContent] : [null, ''] })()"
            )
            if state == "done":
                break
            if state == "streaming" and text:
                streaming.append(text)
            await asyncio.sleep(0.05)
        final = await page.evaluate(f"document.querySelector('{last}').textContent")
        error = await page.evaluate(f"document.querySelector('{last}').classList.contains('error')")
        user = await page.evaluate("document.querySelector('.user').textContent")
        assert user == "What does a Python decorator do?"
        return streaming, final, state, error
    finally:
        await socket.close()
