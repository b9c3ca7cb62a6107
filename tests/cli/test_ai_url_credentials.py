"""``ember ai --url URL`` sends a token only where it belongs: EMBER_API_TOKEN to the configured
platform ($EMBER_PLATFORM), a saved login to the platform it was saved for; never to another URL."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from ember.cli.session import saved_credentials


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).seen.append(self.headers.get("authorization"))
        body = json.dumps({"success": True, "errors": [], "messages": [],
                           "result": [{"id": "acc1", "name": "a"}]}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_env_token_goes_only_to_the_configured_platform(
    recorder: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("EMBER_API_TOKEN", "ember_secret")
    monkeypatch.setenv("EMBER_CREDENTIALS", str(tmp_path) + "/credentials.json")
    monkeypatch.setenv("EMBER_PLATFORM", "http://127.0.0.1:9")  # somewhere else
    assert saved_credentials(recorder) is None
    assert _Recorder.seen == []  # nothing was sent there, let alone the token
    monkeypatch.setenv("EMBER_PLATFORM", recorder)
    found = saved_credentials(recorder)
    assert found is not None and (found.token, found.account_id) == ("ember_secret", "acc1")
    assert _Recorder.seen == ["Bearer ember_secret"]
