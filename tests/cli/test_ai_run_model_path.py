"""``ember ai run MODEL --url``: the model id reaches the platform as the path of ``ai/run``
whatever it holds; "..", "?" or "#" in it never take the request (and the user's token) to
another route of the account."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from ember.cli.main import cli
from tests.platform.conftest import ServerThread

SEEN: list[tuple[str, bytes]] = []


async def _app(scope: dict, receive: object, send: object) -> None:
    assert scope["type"] == "http"
    SEEN.append((scope["path"], scope["raw_path"]))
    body = b'{"result": {"response": "ok"}, "success": true, "errors": [], "messages": []}'
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


@pytest.fixture(scope="module")
def recorder() -> Iterator[str]:
    with ServerThread(_app) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "model",
    [
        "@cf/zai-org/glm-4.7-flash",
        "../../storage/kv/namespaces",
        "a?b=1#c",
        "./x/..",
    ],
)
def test_the_model_id_is_the_path_after_ai_run(recorder: str, model: str) -> None:
    SEEN.clear()
    result = CliRunner().invoke(
        cli, ["ai", "run", model, "hi", "--url", recorder], env={"EMBER_API_TOKEN": ""}
    )
    assert len(SEEN) == 1, result.output
    path, raw = SEEN[0]
    prefix = "/client/v4/accounts/"
    assert path.startswith(prefix)
    assert path.split("/ai/run/", 1)[1] == model, (path, raw)
    assert b"/ai/run/" in raw
