"""Shared client-side helpers for the API tests."""

from __future__ import annotations

import httpx

from ember.runtime.deployments import pow
from tests.platform.conftest import RunningPlatform


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
