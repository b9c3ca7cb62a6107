"""``ember ai --url URL`` sends a token only where it belongs: EMBER_API_TOKEN to the configured
platform ($EMBER_PLATFORM), a saved login to the platform it was saved for; never to another URL."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from ember.cli.ai_remote import auth_refused
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


def test_a_refusal_says_when_the_env_token_was_kept_from_that_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 401 with EMBER_API_TOKEN set says why the token was not sent (another URL than
    $EMBER_PLATFORM, or that platform named no account for it), never to send it elsewhere:
    the login hint alone pointed at what the user had already done."""
    url = "http://127.0.0.1:18790"
    body = b'{"success": false, "errors": [{"code": 10000, "message": "Authentication error"}]}'
    response = httpx.Response(401, content=body)
    monkeypatch.setenv("EMBER_API_TOKEN", "ember_secret")
    monkeypatch.delenv("EMBER_PLATFORM", raising=False)
    refused = str(auth_refused(url, response, body))
    assert "10000: Authentication error" in refused and "ember login --platform" in refused
    assert "EMBER_API_TOKEN is set but was not sent" in refused, refused
    assert "EMBER_PLATFORM (unset, so" in refused and "never to another URL" in refused
    assert f"EMBER_PLATFORM={url}" not in refused  # review24: never a hint to send it there
    monkeypatch.setenv("EMBER_PLATFORM", "http://127.0.0.1:9")
    assert "EMBER_PLATFORM (http://127.0.0.1:9)" in str(auth_refused(url, response, body))
    monkeypatch.setenv("EMBER_PLATFORM", url)  # not sent there either: it named no account
    here = str(auth_refused(url, response, body))
    assert "asking this platform for its accounts with it" in here, here
    assert "failed or named none, so check the token" in here, here
    # review23: a saved login was sent (and refused): nothing about the env token
    assert "EMBER_API_TOKEN" not in str(auth_refused(url, response, body, sent_token=True))
    monkeypatch.delenv("EMBER_API_TOKEN")
    assert "EMBER_API_TOKEN" not in str(auth_refused(url, response, body))
    assert "secret" not in refused
