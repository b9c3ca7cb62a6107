"""``ember ai models|run --url``: talking to a running ember's AI API over HTTP.

Whatever answers at the URL, the user gets one line: a network failure names the URL and
httpx's reason; an answer that is not ember's AI API (a worker's text, a proxy's HTML page, an
empty body, JSON of another shape, a broken event stream) names its status, content-type and
the start of its body, and what was expected there. Never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from ember.cli.failure import RemoteFailure, Unreachable
from ember.cli.platform_client import resolve_platform
from ember.errors import EmberError

EXPECTED = "ember's AI API (ember dev / ember serve with an ai binding, or ember models serve)"
EXCERPT_CHARS = 80  # enough to recognise a page or a greeting, short enough for one line
CONNECT_TIMEOUT_S = 10.0
GENERATE_TIMEOUT_S = 600.0  # a long answer from a CPU model


@dataclass(frozen=True)
class AIEndpoint:
    """Where the AI API answers: ``ember dev``'s (account ``local``, no token) or an ember
    platform's, with the account and token ``ember login`` (or a temporary deploy) saved."""

    url: str
    account: str = "local"
    token: str | None = None

    @classmethod
    def at(cls, url: str) -> AIEndpoint:
        from ember.cli.session import saved_credentials

        saved = saved_credentials(url) if url.startswith(("http://", "https://")) else None
        if saved is None:
            return cls(url)
        return cls(url, saved.account_id, saved.token)

    def route(self, suffix: str) -> str:
        return f"{self.url.rstrip('/')}/client/v4/accounts/{self.account}/ai{suffix}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def excerpt(body: bytes) -> str:
    """The start of ``body`` as one quoted line, or ``an empty body``."""
    text = " ".join(body.decode("utf-8", "replace").split())
    if not text:
        return "an empty body"
    cut = text[:EXCERPT_CHARS]
    return repr(cut) + ("..." if len(text) > EXCERPT_CHARS else "")


def not_the_api(url: str, response: httpx.Response, body: bytes, why: str = "") -> Exception:
    """The error for an answer that is not ember's AI API."""
    content_type = response.headers.get("content-type") or "no content-type"
    what = f"{response.status_code} ({content_type}) with {excerpt(body)}"
    detail = f" ({why})" if why else ""
    text = f"{url} answered {what}{detail}; expected {EXPECTED}"
    return RemoteFailure(response.status_code, None, text, kind="platform")


def unreachable(url: str, exc: Exception) -> Exception:
    """The error for a request that got no HTTP answer (refused, timed out, hung up, bad URL)."""
    reason = str(exc) or type(exc).__name__
    return Unreachable(f"could not reach {url}: {reason}")


def auth_refused(
    url: str, response: httpx.Response, body: bytes, sent_token: bool = False
) -> Exception | None:
    """The error for a 401/403 from a platform (``ember serve``'s AI API is per account, behind
    its token): what it said, and the login that gets past it. None for any other answer."""
    if response.status_code not in (401, 403):
        return None
    code = None
    try:
        error = json.loads(body)["errors"][0]
        said = f"{error['code']}: {error['message']}"
        code = error["code"] if isinstance(error["code"], int) else None
    except (ValueError, TypeError, KeyError, IndexError):
        said = excerpt(body)
    return RemoteFailure(
        response.status_code,
        code,
        f"{url} answered {response.status_code} ({said}); its AI API needs an account's token: "
        f"ember login --platform {url} --token TOKEN (the platform's operator creates accounts "
        f"and tokens with ember accounts create){'' if sent_token else _unsent_token_note(url)}",
    )


def _unsent_token_note(url: str) -> str:
    """Why a set EMBER_API_TOKEN was not sent: it belongs to $EMBER_PLATFORM only (sending it
    to whatever --url names would hand it to any server), or that platform named no account
    for it. Never a hint to send it somewhere else."""
    if not os.environ.get("EMBER_API_TOKEN"):
        return ""
    try:
        configured = resolve_platform(None)
        here = resolve_platform(url) == configured
    except EmberError:
        return ""
    if here:
        return (
            ". EMBER_API_TOKEN is set but was not sent: asking this platform for its accounts "
            "with it (GET /client/v4/accounts) failed or named none, so check the token; while "
            "it is set, a saved login for this platform is not used"
        )
    where = configured if os.environ.get("EMBER_PLATFORM") else f"unset, so {configured}"
    return (
        f". EMBER_API_TOKEN is set but was not sent: it goes only to $EMBER_PLATFORM ({where}), "
        "never to another URL"
    )


def list_models(url: str) -> list[dict[str, Any]]:
    """The rows of ``GET URL/client/v4/accounts/ACCOUNT/ai/v1/models``."""
    endpoint = AIEndpoint.at(url)
    try:
        response = httpx.get(
            endpoint.route("/v1/models"), headers=endpoint.headers, timeout=CONNECT_TIMEOUT_S
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise unreachable(url, exc) from None
    body = response.content
    refused = auth_refused(url, response, body, endpoint.token is not None)
    if refused is not None:
        raise refused
    try:
        rows = json.loads(body)["data"]
        if response.status_code != 200 or not isinstance(rows, list):
            raise TypeError
        for row in rows:  # the fields the table prints
            row["id"], row["architecture"], row["context_window"], row["loaded"]
    except (ValueError, TypeError, KeyError, IndexError):
        raise not_the_api(url, response, body) from None
    return rows


def run_model(
    url: str,
    model: str,
    inputs: dict[str, Any],
    on_result: Callable[[Any], None],
    on_event: Callable[[Any], None],
) -> None:
    """POST ``inputs`` to ``URL/client/v4/accounts/ACCOUNT/ai/run/MODEL``; the whole result
    goes to ``on_result``, each streamed payload to ``on_event``. A ``success: false`` answer
    (the model refused the request) raises ``RemoteFailure`` with its code and message."""
    from ember.cli.session import path_segment
    from ember.models.api.sse import parse_sse

    endpoint = AIEndpoint.at(url)
    timeout = httpx.Timeout(GENERATE_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    try:
        with httpx.stream(
            "POST",
            # Each part of the id as its own segment: "..", "?" or "#" in a model id must not
            # make the request reach another route of the account with the user's token.
            endpoint.route("/run/" + "/".join(path_segment(part) for part in model.split("/"))),
            json=inputs,
            headers=endpoint.headers,
            timeout=timeout,
        ) as response:
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                seen = b""
                for block in _sse_blocks(response.iter_raw()):
                    seen = seen or block
                    try:
                        for payload in parse_sse(block):
                            _event(payload, on_event, response.status_code)
                    except (ValueError, TypeError, KeyError, IndexError):
                        raise not_the_api(url, response, seen, "not its event stream") from None
                return
            body = response.read()
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise unreachable(url, exc) from None
    refused = auth_refused(url, response, body, endpoint.token is not None)
    if refused is not None:
        raise refused
    try:
        answer = json.loads(body)
        if not isinstance(answer, dict) or not isinstance(answer.get("success"), bool):
            raise TypeError
        if not answer["success"]:
            _raise_error(answer, response.status_code)
        if response.status_code != 200:
            raise TypeError
        on_result(answer["result"])
    except (ValueError, TypeError, KeyError, IndexError):
        raise not_the_api(url, response, body) from None


def _sse_blocks(chunks: Iterator[bytes]) -> Iterator[bytes]:
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        *complete, buffer = buffer.split(b"\n\n")
        for block in complete:
            yield block + b"\n\n"
    if buffer.strip():
        yield buffer + b"\n\n"


def _event(payload: Any, on_event: Callable[[Any], None], status: int) -> None:
    if isinstance(payload, dict) and payload.get("errors"):
        _raise_error(payload, status)
    if payload != "[DONE]":
        on_event(payload)


def _raise_error(answer: dict[str, Any], status: int) -> None:
    """An ember error answer (``errors: [{code, message}]``) as the CLI's one line."""
    errors = answer.get("errors")
    error = errors[0] if isinstance(errors, list) and errors else {}
    if not isinstance(error, dict) or "message" not in error:
        raise TypeError  # not ember's error shape
    code = error.get("code")
    message = str(error["message"])
    raise ai_refusal(status, code if isinstance(code, int) else None, message)


def ai_refusal(status: int, code: int | None, message: str) -> RemoteFailure:
    """A refused AI request as the CLI reports it: ``"<code>: <message>"``, Workers AI's own
    text (``InferenceUpstreamError``'s), which scripts match on."""
    return RemoteFailure(status, code, f"{code}: {message}" if code else message)
