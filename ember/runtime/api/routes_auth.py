"""Who am I: ``/user/tokens/verify``, ``/user``, ``/accounts``, ``/memberships`` (wrangler whoami,
and deploy without CLOUDFLARE_ACCOUNT_ID)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api import serializers
from ember.runtime.api.context import caller
from ember.runtime.api.envelope import ok
from ember.runtime.api.paging import paged


async def verify_token(request: Request) -> Response:
    who = caller(request)
    return ok(
        {
            "id": who.token.id,
            "status": "active",
            "expires_on": serializers.iso(who.token.expires_at),
        }
    )


async def user(request: Request) -> Response:
    who = caller(request)
    return ok(
        {
            "id": who.account.id,
            "email": who.account.email,
            "first_name": None,
            "last_name": None,
            "has_pro_zones": False,
            "suspended": False,
        }
    )


async def accounts(request: Request) -> Response:
    who = caller(request)
    return paged(request, [serializers.account(who.account)])


async def account(request: Request) -> Response:
    return ok(serializers.account(caller(request).account))


async def memberships(request: Request) -> Response:
    who = caller(request)
    items = [
        {
            "id": who.token.id,
            "status": "accepted",
            "roles": ["Administrator"],
            "account": {"id": who.account.id, "name": who.account.name},
            "permissions": {},
        }
    ]
    return paged(request, items)


ROUTES = [
    Route("/user/tokens/verify", verify_token, methods=["GET"]),
    Route("/user", user, methods=["GET"]),
    Route("/accounts", accounts, methods=["GET"]),
    Route("/accounts/{account_id}", account, methods=["GET"]),
    Route("/memberships", memberships, methods=["GET"]),
]
