"""``ember dev``'s error page carries the AI notes of the request that failed.

The usual failure after a small budget with thinking on: content is null, and the handler's
``.upper()`` raises. The page showed only the AttributeError while the explanation (and the
misspelt field) went to the console: a caller that reads only the HTTP answer (an agent) never
saw why.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.bindings.ai.dev_support import DevServer, serve_ai_project

GLM = "@cf/zai-org/glm-4.7-flash"
WORKER = f"""
from workers import Response

async def on_fetch(request, env):
    if request.url.endswith("/plain-failure"):
        raise ValueError("no AI here")
    messages = [{{"role": "user", "content": "hi"}}]
    inputs = {{"messages": messages, "max_completion_tokens": 4, "max_token": 3, "temperature": 0}}
    result = await env.AI.run("{GLM}", inputs)
    return Response(result["choices"][0]["message"]["content"].upper())
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-error-notes", WORKER)


def test_the_error_page_shows_the_requests_ai_notes(dev: DevServer) -> None:
    text = httpx.get(dev.url, headers={"accept": "text/plain"}, timeout=300)
    assert text.status_code == 500
    assert "AttributeError" in text.text, text.text
    assert "content is null: the model spent all of max_completion_tokens=4" in text.text
    assert "'max_token' (did you mean 'max_tokens'?)" in text.text

    page = httpx.get(dev.url, headers={"accept": "text/html"}, timeout=300)
    assert page.status_code == 500
    assert "content is null: the model spent all of max_completion_tokens=4" in page.text
    assert "&#x27;max_token&#x27; (did you mean &#x27;max_tokens&#x27;?)" in page.text


def test_another_requests_failure_shows_no_notes(dev: DevServer) -> None:
    text = httpx.get(f"{dev.url}/plain-failure", headers={"accept": "text/plain"}, timeout=60)
    assert text.status_code == 500 and "no AI here" in text.text
    assert "content is null" not in text.text and "max_token" not in text.text
