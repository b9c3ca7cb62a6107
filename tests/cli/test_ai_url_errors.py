"""``ember ai models|run --url`` against something that is not ember's AI API: one clear line
naming what answered (status, content-type, an excerpt) and what was expected; no traceback."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
import uvicorn
from click.testing import CliRunner

from ember.cli.main import main
from tests.bindings.ai.support import wait_until

EXPECTED = "ember's AI API"
ANSWERS: dict[str, tuple[int, str, bytes]] = {
    "text": (200, "text/plain; charset=utf-8", b"Hello from the worker"),
    "html": (502, "text/html", b"<html><body>Bad gateway</body></html>"),
    "empty": (200, "text/plain", b""),
    "json": (200, "application/json", b'{"hello": "world"}'),
    "list": (200, "application/json", b"[1, 2, 3]"),
    "sse": (200, "text/event-stream", b"data: not json\n\n"),
    "badsse": (200, "text/event-stream", b'data: {"choices": 5}\n\n'),
    "oops": (500, "application/json", b'{"success": true}'),
}


async def _app(scope: dict, receive: object, send: object) -> None:
    assert scope["type"] == "http"
    status, content_type, body = ANSWERS[scope["path"].split("/")[1]]
    headers = [(b"content-type", content_type.encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


@pytest.fixture(scope="module")
def other_server() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(_app, log_level="error", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the other server", 10)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture
def hangs_up() -> Iterator[str]:
    """A server that accepts each connection and closes it without answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                # An end, never a reset: closed with the request's body unread, the connection
                # sent a reset, and the client's error then depended on whether its body was
                # written first ("Connection reset by peer" in one run, "Server disconnected" in
                # the next, seen under load). So: end our side, then read until the client goes.
                try:
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass
                except OSError:  # the client reset it: nothing left to read
                    pass

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def _refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _fails_clearly(args: list[str]) -> str:
    """ember's entry point (its error boundary) on ``args``: exit 1 and one ``ember: error:``
    line; the same failure as one JSON object on stdout with ``--json``."""
    with CliRunner().isolation() as (stdout, stderr, _):
        with pytest.raises(SystemExit) as exited:
            main(args)
        output = stderr.getvalue().decode()
        assert exited.value.code == 1 and stdout.getvalue() == b"", output
    assert "Traceback" not in output
    assert output.startswith("ember: error: "), output
    if not any(
        "badsse" in arg for arg in args
    ):  # --json prints events as they come, without reading them
        with CliRunner().isolation() as (stdout, _, _):
            with pytest.raises(SystemExit):
                main([*args, "--json"])
            error = json.loads(stdout.getvalue())["error"]
        assert error["message"] in output, error
        assert error["kind"] in ("platform", "unreachable", "no_answer"), error
    return output


@pytest.mark.parametrize("kind", ["text", "html", "empty", "json", "list", "oops"])
def test_models_names_what_answered_and_what_was_expected(other_server: str, kind: str) -> None:
    status, content_type, body = ANSWERS[kind]
    output = _fails_clearly(["ai", "models", "--url", f"{other_server}/{kind}"])
    assert f"{other_server}/{kind}" in output and EXPECTED in output
    assert str(status) in output and content_type in output
    assert (body[:10].decode() if body else "empty") in output
    assert "Expecting value" not in output


@pytest.mark.parametrize("kind", ["text", "html", "empty", "json", "list", "oops", "sse", "badsse"])
@pytest.mark.parametrize("stream", [False, True])
def test_run_names_what_answered_and_what_was_expected(
    other_server: str, kind: str, stream: bool
) -> None:
    status, content_type, _ = ANSWERS[kind]
    args = ["ai", "run", "@cf/zai-org/glm-4.7-flash", "hi", "--url", f"{other_server}/{kind}"]
    output = _fails_clearly(args + (["--stream"] if stream else []))
    assert EXPECTED in output and str(status) in output and content_type in output


@pytest.mark.parametrize("command", [["models"], ["run", "@cf/zai-org/glm-4.7-flash", "hi"]])
def test_network_failures_are_one_line(command: list[str], hangs_up: str) -> None:
    for url in (_refused_url(), hangs_up, "nothing://at all"):
        output = _fails_clearly(["ai", *command, "--url", url])
        assert f"could not reach {url}" in output, output
