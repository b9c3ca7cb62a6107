"""The platform's own answers (the claim page, the client/v4 API) are never cached, framed or
sent on as a Referer; the claim link trades its token for an HttpOnly cookie and a URL without
it, so nothing a script on the page can read holds the token. wrangler's claim URL
(``/claim-preview?claimToken=...``) is unchanged and still opens the page."""

from __future__ import annotations

import httpx
from starlette.datastructures import MutableHeaders

from ember.runtime.api.hardening import harden
from tests.platform.conftest import RunningPlatform
from tests.platform.helpers import temporary_account

CLAIM = "/claim-preview"


def _hardened(response: httpx.Response) -> None:
    headers = response.headers
    where = f"{response.request.method} {response.request.url.path} -> {response.status_code}"
    assert headers.get("cache-control") == "no-store", where
    assert headers.get("referrer-policy") == "no-referrer", where
    assert headers.get("x-frame-options") == "DENY", where
    assert headers.get("x-content-type-options") == "nosniff", where
    assert headers.get("cross-origin-resource-policy") == "same-origin", where
    assert headers.get("cross-origin-opener-policy") == "same-origin", where
    policy = headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy and "sandbox" not in policy, where


def test_api_answers_are_hardened(platform: RunningPlatform) -> None:
    with platform.client() as client:
        _hardened(client.post("/provisioning/previews/challenge", json={}))  # 200
        _hardened(client.get("/user/tokens/verify"))  # 401
        _hardened(client.get("/no/such/route"))  # 404
    _hardened(httpx.get(platform.url + "/elsewhere"))


def test_the_claim_link_trades_its_token_for_a_cookie(platform: RunningPlatform) -> None:
    temp = temporary_account(platform)
    url, token = temp["claim"]["url"], temp["claim"]["token"]  # type: ignore[index]
    assert url == f"{platform.url}{CLAIM}?claimToken={token}"  # what wrangler prints
    with httpx.Client(timeout=30) as browser:
        landed = browser.get(url)
        assert landed.status_code == 303 and landed.headers["location"] == CLAIM
        _hardened(landed)
        cookie = landed.headers["set-cookie"]
        assert token in cookie and f"Path={CLAIM}" in cookie
        assert "HttpOnly" in cookie and "samesite=lax" in cookie.lower()
        # High: a flood of (Low) worker cookies on the shared origin evicts those first.
        assert cookie.endswith("; Priority=High")
        page = browser.get(platform.url + CLAIM)
        assert page.status_code == 200 and temp["account"]["name"] in page.text  # type: ignore[index]
        assert token not in page.text and str(page.url) == platform.url + CLAIM
        _hardened(page)
        assert "default-src 'none'" in page.headers["content-security-policy"]
        claimed = browser.post(platform.url + CLAIM, data={})  # the button: the cookie has it
        assert claimed.status_code == 200 and "is now permanent" in claimed.text, claimed.text
        _hardened(claimed)
        assert "Max-Age=0" in claimed.headers["set-cookie"]  # the cookie is spent
        assert claimed.headers["set-cookie"].endswith("; Priority=High")
    gone = httpx.get(url)
    assert gone.status_code == 404 and "not valid" in gone.text
    _hardened(gone)


def test_a_claim_page_without_a_token_says_so(platform: RunningPlatform) -> None:
    bare = httpx.get(platform.url + CLAIM)
    assert bare.status_code == 404 and "not valid" in bare.text
    refused = httpx.post(platform.url + CLAIM, data={})
    assert refused.status_code == 403 and "claim" in refused.text.lower()
    _hardened(refused)


def test_every_cookie_of_the_platform_is_high_priority() -> None:
    headers = MutableHeaders(raw=[(b"set-cookie", b"a=1; Priority=Low"), (b"set-cookie", b"b=2")])
    harden(headers)
    assert headers.getlist("set-cookie") == ["a=1; Priority=High", "b=2; Priority=High"]
