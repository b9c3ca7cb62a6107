"""Shared client-side helpers for the API tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from ember.runtime.deployments import pow
from ember.runtime.deployments.config import PlatformConfig
from tests.platform.conftest import RunningPlatform, start_platform, worker_upload


def temporary_account(platform: RunningPlatform) -> dict[str, object]:
    """Do what wrangler does for --temporary over HTTP; returns the provisioning result."""
    with httpx.Client(base_url=platform.api, timeout=30) as client:
        challenge = client.post("/provisioning/previews/challenge", json={}).json()["result"]
        solved = pow.solve_challenge(
            pow.Challenge(
                challenge["challengeToken"], challenge["seed"], challenge["k"], challenge["g"], 0.0
            )
        )
        reply = client.post(
            "/provisioning/previews",
            json={
                "acceptTermsOfService": "yes",
                "challengeToken": challenge["challengeToken"],
                "solution": {"checkpoints": solved},
            },
        )
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]


def error_of(response: httpx.Response) -> tuple[int, int, str]:
    body = response.json()
    assert body["success"] is False and body["result"] is None
    return response.status_code, body["errors"][0]["code"], body["errors"][0]["message"]


@contextmanager
def temporary_tenant(
    state_dir: Path, config: PlatformConfig
) -> Iterator[tuple[RunningPlatform, str, httpx.Client]]:
    """A platform with ``config`` on a loopback port, a temporary account on it, and a client
    holding that account's token: ``(platform, account id, client)``; closed afterwards."""
    plane, clock, server, hub = start_platform(state_dir, config)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            temp = temporary_account(platform)
            account_id = str(temp["account"]["id"])  # type: ignore[index]
            with platform.client(str(temp["account"]["apiToken"])) as client:  # type: ignore[index]
                yield platform, account_id, client
    finally:
        plane.close()


def put_upload(
    client: httpx.Client,
    account_id: str,
    name: str,
    headers: dict[str, str] | None = None,
    **kw: object,
) -> httpx.Response:
    """``PUT .../workers/scripts/NAME`` with ``worker_upload(**kw)`` as its body."""
    body, content_type = worker_upload(**kw)  # type: ignore[arg-type]
    return client.put(
        f"/accounts/{account_id}/workers/scripts/{name}",
        content=body,
        headers={"content-type": content_type, **(headers or {})},
    )
