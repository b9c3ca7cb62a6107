"""ember's HTTP client for a platform's client/v4 API (the same API wrangler uses).

Errors come back as ember errors carrying Cloudflare's code: ``PlatformAuthError`` (401/403),
``PlatformNotFound`` (404) and ``PlatformRequestError`` for the rest, each with the platform's own
message, so the CLI prints what the server said. A platform that cannot be reached and one that
took the request and closed the connection before answering are told apart (``lost_answer.py``).
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from ember import __version__ as ember_version
from ember.cli.failure import RemoteFailure, Unreachable
from ember.cli.lost_answer import AFTER_CONNECT, answer_lost
from ember.errors import AuthError, NotFound, UserError

DEFAULT_PLATFORM = "http://127.0.0.1:8787"
API_PREFIX = "/client/v4"
REACHABLE_TIMEOUT_S = 10.0


class PlatformRequestError(RemoteFailure):
    def __init__(self, status: int, code: int | None, message: str) -> None:
        super().__init__(status, code, f"{message} [code: {code}]" if code is not None else message)


class PlatformAuthError(PlatformRequestError, AuthError):
    pass


class PlatformNotFound(PlatformRequestError, NotFound):
    pass


def platform_origin(option: str | None) -> str:
    """How ``resolve_platform(option)`` chose its URL, for messages about that URL."""
    if option:
        return "--platform"
    if os.environ.get("EMBER_PLATFORM"):
        return "$EMBER_PLATFORM"
    return "the default"


def _guess_origin(url: str) -> str:
    # For clients made from a URL alone: the environment says which source gave it.
    env = os.environ.get("EMBER_PLATFORM")
    if env and env.rstrip("/").removesuffix(API_PREFIX) == url:
        return "$EMBER_PLATFORM"
    return "the default" if url == DEFAULT_PLATFORM else "--platform"


def unreachable(url: str, origin: str, exc: Exception) -> Unreachable:
    """The one line for a platform that does not answer: the URL, where it came from, why."""
    reason = (str(exc) or type(exc).__name__).rstrip(".")  # the sentence goes on after it
    chosen = f"from {origin}" if origin != "the default" else "ember's default"
    return Unreachable(
        f"cannot reach the platform at {url} ({chosen}): {reason}. Is `ember serve` running "
        "there? Choose another with --platform URL or $EMBER_PLATFORM."
    )


def resolve_platform(option: str | None) -> str:
    """``--platform``, then ``EMBER_PLATFORM``, then ember serve's default address."""
    url = option or os.environ.get("EMBER_PLATFORM") or DEFAULT_PLATFORM
    url = url.rstrip("/")
    if url.endswith(API_PREFIX):
        url = url[: -len(API_PREFIX)]
    if not url.startswith(("http://", "https://")):
        raise UserError(f"platform URL {url!r} must start with http:// or https://")
    return url


class PlatformClient:
    def __init__(
        self,
        platform: str,
        token: str | None = None,
        timeout: float = 120.0,
        origin: str | None = None,
    ) -> None:
        self.platform = platform
        self.origin = origin or _guess_origin(platform)
        headers = {"user-agent": f"ember/{ember_version}"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=platform + API_PREFIX, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PlatformClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; returns the envelope's ``result`` or raises the platform's error."""
        response = self._send(method, path, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "success" not in body:
            raise PlatformRequestError(
                response.status_code,
                None,
                f"{method} {path}: unexpected reply from "
                f"{self.platform} (HTTP {response.status_code})",
            )
        if response.status_code >= 400 or not body.get("success"):
            errors = body.get("errors") or [{}]
            code, message = errors[0].get("code"), errors[0].get("message", "request failed")
            cls = (
                PlatformAuthError
                if response.status_code in (401, 403)
                else PlatformNotFound
                if response.status_code == 404
                else PlatformRequestError
            )
            raise cls(response.status_code, code, message)
        return body.get("result")

    def check_reachable(self) -> None:
        """Raise the "cannot reach" error unless something answers HTTP at the platform: asked
        before a command reports a missing login or starts work (proof of work) that would
        only end in a connection error."""
        self._send("GET", "/", timeout=REACHABLE_TIMEOUT_S)

    def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._send(method, path, **kwargs)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except AFTER_CONNECT as exc:  # reached, then no answer: not "cannot reach"
            raise answer_lost(self.platform, method, path, exc) from None
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise unreachable(self.platform, self.origin, exc) from None
        except httpx.HTTPError as exc:
            raise UserError(f"{method} {self.platform}{API_PREFIX}{path} failed: {exc}") from exc
