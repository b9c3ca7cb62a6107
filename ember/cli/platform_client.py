"""ember's HTTP client for a platform's client/v4 API (the same API wrangler uses).

Errors come back as ember errors carrying Cloudflare's code: ``PlatformAuthError`` (401/403),
``PlatformNotFound`` (404) and ``PlatformRequestError`` for the rest, each with the platform's own
message, so the CLI prints what the server said.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from ember import __version__ as ember_version
from ember.errors import AuthError, NotFound, UserError

DEFAULT_PLATFORM = "http://127.0.0.1:8787"
API_PREFIX = "/client/v4"


class PlatformRequestError(UserError):
    def __init__(self, status: int, code: int | None, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(f"{message} [code: {code}]" if code is not None else message)


class PlatformAuthError(PlatformRequestError, AuthError):
    pass


class PlatformNotFound(PlatformRequestError, NotFound):
    pass


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
    def __init__(self, platform: str, token: str | None = None, timeout: float = 120.0) -> None:
        self.platform = platform
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

    def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._send(method, path, **kwargs)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise UserError(
                f"cannot reach the ember platform at {self.platform} ({exc}); is `ember serve` "
                "running there? Choose another with --platform URL or EMBER_PLATFORM."
            ) from exc
        except httpx.HTTPError as exc:
            raise UserError(f"{method} {self.platform}{API_PREFIX}{path} failed: {exc}") from exc
