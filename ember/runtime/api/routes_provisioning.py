"""Temporary accounts: the proof-of-work challenge, the account, and the claim (API and page).

``POST /provisioning/previews/challenge`` and ``POST /provisioning/previews`` are the two
unauthenticated calls of ``wrangler deploy --temporary`` (cloudflare-api.md §4.1); ember's own CLI
makes the same two calls. ``/claim-preview?claimToken=...`` is the claim URL both print: opening
it moves the token into a cookie and shows what is being claimed, and its button claims it.
Claims are capped per client address (``platform.temporary.claims_per_day``) and the operator
may turn them off (``platform.temporary.claim: off``): the claim object then says
``claimable: false`` (an ember field; wrangler ignores it) and the page says why.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ember.errors import EmberError
from ember.runtime.api import serializers
from ember.runtime.api.context import (
    client_address,
    json_body,
    live_of,
    plane_of,
    public_origin,
    read_body,
)
from ember.runtime.api.envelope import ok, retry_after_header, status_and_code
from ember.runtime.api.routes_tail import hub_of
from ember.runtime.deployments.errors import BodyTooLarge, ClaimsTurnedOff, InvalidRequest

CLAIM_PATH = "/claim-preview"
CLAIM_COOKIE = "ember_claim"
# The claim form holds one token; anything much bigger is not our form.
CLAIM_FORM_LIMIT = 16 * 1024


async def challenge(request: Request) -> Response:
    await read_body(request, 64 * 1024)  # wrangler sends {}; nothing in it is needed
    return ok(plane_of(request).issue_challenge().to_api())


async def create_preview(request: Request) -> Response:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest("expected a JSON object with challengeToken and solution")
    if body.get("eventCode") is not None:
        raise _EventCodeUnknown("event codes are not used by ember; leave --event-code out")
    plane = plane_of(request)
    created = plane.create_temporary_account(
        client_address(request), body.get("challengeToken"), body.get("solution")
    )
    account = created.account
    expires = serializers.iso(account.expires_at)
    return ok(
        {
            "account": {
                "id": account.id,
                "name": account.name,
                "apiToken": created.token.token,
                "expiresAt": expires,
                "type": "standard",
                "tokenId": created.token.record.id,
            },
            "claim": {
                "url": claim_url(request, created.claim_token),
                "expiresAt": expires,
                "token": created.claim_token,
                "claimable": plane.config.temporary.claim == "open",
            },
        }
    )


def claim_url(request: Request, claim_token: str) -> str:
    return f"{public_origin(request)}{CLAIM_PATH}?claimToken={claim_token}"


async def claim_api(request: Request) -> Response:
    body = await json_body(request)
    token = body.get("claimToken") if isinstance(body, dict) else None
    if not isinstance(token, str):
        raise InvalidRequest('expected {"claimToken": "<token from the claim URL>"}')
    claimed = plane_of(request).claim(token, client_address(request))
    hub_of(request.app.state).close_tails(claimed.ended_tails)
    await live_of(request).reconcile_account(claimed.account.id)  # permanent limits from now on
    return ok(
        {
            "account": serializers.account(claimed.account),
            "apiToken": claimed.token.token,
            "tokenId": claimed.token.record.id,
        }
    )


async def claim_page(request: Request) -> Response:
    """The claim link (``?claimToken=``, what wrangler prints) trades its token for a cookie
    and a redirect to the bare page, so the token is in no URL, history entry or Referer of
    the page, nor in its HTML: only in an HttpOnly cookie that goes to this path alone."""
    plane = plane_of(request)
    linked = request.query_params.get("claimToken")
    if linked is not None:
        if plane.accounts.find_by_claim_token(linked) is None:
            return _not_valid()
        moved = RedirectResponse(CLAIM_PATH, status_code=303)
        moved.set_cookie(CLAIM_COOKIE, linked, path=CLAIM_PATH, httponly=True, samesite="lax")
        return moved
    account = plane.accounts.find_by_claim_token(request.cookies.get(CLAIM_COOKIE, ""))
    if account is None:
        return _not_valid()
    if plane.config.temporary.claim != "open":
        return _page("Claiming is turned off", f"<p>{html.escape(str(ClaimsTurnedOff()))}</p>", 403)
    return _page(
        f"Claim {html.escape(account.name)}",
        f"<p>Temporary account <b>{html.escape(account.name)}</b> and every Worker, KV namespace "
        "and secret in it will become permanent and yours. Its temporary API token stops working;"
        " you get a new one.</p>"
        f'<form method="post" action="{CLAIM_PATH}">'
        '<button type="submit">Claim this account</button></form>',
    )


def _not_valid() -> HTMLResponse:
    return _page(
        "Claim link not valid",
        "<p>This claim link is not valid: it was already used, it expired, or it was mistyped.</p>",
        status=404,
    )


async def claim_submit(request: Request) -> Response:
    try:
        raw = await read_body(request, CLAIM_FORM_LIMIT)
    except BodyTooLarge as exc:  # a page for the browser that posted it, not an API envelope
        return _page(
            "Form too large",
            f"<p>The claim form sent {int(exc.observed):,} bytes; the claim form is at most "
            f"{CLAIM_FORM_LIMIT:,} bytes (it holds only the claim token). Open the claim link "
            "again and press its button.</p>",
            status=413,
        )
    form = parse_qs(raw.decode("utf-8", "replace"))
    # The page's button sends no token (the cookie has it); a form of one's own may send it.
    token = (form.get("claimToken") or [request.cookies.get(CLAIM_COOKIE, "")])[0]
    try:
        claimed = plane_of(request).claim(token, client_address(request))
    except EmberError as exc:  # the API's status (403, 429 at the cap) on a page
        failed = _page("Claim failed", f"<p>{html.escape(str(exc))}</p>", status_and_code(exc)[0])
        retry_after = retry_after_header(exc)
        if retry_after is not None:
            failed.headers["retry-after"] = retry_after
        return failed
    hub_of(request.app.state).close_tails(claimed.ended_tails)
    await live_of(request).reconcile_account(claimed.account.id)
    api_token = html.escape(claimed.token.token)
    origin = html.escape(public_origin(request))
    done = _page(
        "Account claimed",
        f"<p>Account <b>{html.escape(claimed.account.name)}</b> is now permanent.</p>"
        "<p>Your API token (shown once, keep it secret):</p>"
        f"<pre>{api_token}</pre><p>Log in with:</p>"
        f"<pre>ember login --platform {origin} --token {api_token}</pre>",
    )
    done.delete_cookie(CLAIM_COOKIE, path=CLAIM_PATH, httponly=True, samesite="lax")
    return done


class _EventCodeUnknown(InvalidRequest):
    cf_code = 1036


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><h1>{title}</h1>{body}</body></html>",
        status_code=status,
    )  # no-store, no-referrer and no framing: api/hardening.py, on every platform answer


API_ROUTES = [
    Route("/provisioning/previews/challenge", challenge, methods=["POST"]),
    Route("/provisioning/previews", create_preview, methods=["POST"]),
    Route("/provisioning/previews/claim", claim_api, methods=["POST"]),
]
PAGE_ROUTES = [
    Route(CLAIM_PATH, claim_page, methods=["GET"]),
    Route(CLAIM_PATH, claim_submit, methods=["POST"]),
]
