"""The ``ember claim`` line ``ember deploy --temporary`` prints parses back to the same token."""

from __future__ import annotations

import shlex

import pytest

from ember.cli.claim import claim
from ember.cli.deploy import claim_command
from ember.cli.platform_client import DEFAULT_PLATFORM


@pytest.mark.parametrize("token", ["-yAbC_9", "--platform", "plain-token_1"])
@pytest.mark.parametrize("platform", [DEFAULT_PLATFORM, "http://127.0.0.1:9999"])
def test_the_printed_claim_command_gives_back_the_token(token: str, platform: str) -> None:
    # URL-safe base64 tokens start with "-" one time in 64: click must not read one as an option.
    words = shlex.split(claim_command(token, platform))
    assert words[:2] == ["ember", "claim"]
    context = claim.make_context("claim", words[2:])
    assert context.params["token"] == token
    expected = None if platform == DEFAULT_PLATFORM else platform
    assert context.params["platform_url"] == expected
