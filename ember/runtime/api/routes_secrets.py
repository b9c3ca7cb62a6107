"""Worker secrets (``wrangler secret put/list/delete``, SDK ``scripts.secrets``).

A secret change derives a new version from the live one and deploys it, so it takes the
worker's upload lock (``uploads.py``) as uploads do, until its version is live: run between an
upload being stored and going live, it was based on the old version and then replaced by the
upload's, and the change was lost. The change writes the version's files out before its row
commits (``deployments/secrets.py``), on an upload thread like an upload's; and it is shielded
from a client that hangs up, so a committed change is always made live too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api.context import caller, json_body, live_of, plane_of, uploads_of
from ember.runtime.api.envelope import ok
from ember.runtime.deployments.errors import InvalidRequest, SecretNotFound
from ember.runtime.deployments.records import SecretValue
from ember.runtime.deployments.secrets import DerivedVersion

SECRETS = "/accounts/{account_id}/workers/scripts/{name}/secrets"
SECRETS_BULK = "/accounts/{account_id}/workers/scripts/{name}/secrets-bulk"
MAX_BULK_SECRETS = 100  # "up to 100 secrets per command" (wrangler secret bulk's help)


async def list_secrets(request: Request) -> Response:
    who = caller(request)
    found = plane_of(request).secrets.list(who.account, request.path_params["name"])
    return ok([{"name": name, "type": kind} for name, kind in found])


async def get_secret(request: Request) -> Response:
    who = caller(request)
    name, secret_name = request.path_params["name"], request.path_params["secret_name"]
    for found, kind in plane_of(request).secrets.list(who.account, name):
        if found == secret_name:
            return ok({"name": found, "type": kind})
    raise SecretNotFound(secret_name, name)


async def put_secret(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    if not (
        isinstance(body, dict)
        and isinstance(body.get("name"), str)
        and isinstance(body.get("text"), str)
    ):
        raise InvalidRequest('expected {"name": "...", "text": "...", "type": "secret_text"}')
    secret = SecretValue(body["name"], body.get("type", "secret_text"), body["text"])
    name, secrets = request.path_params["name"], plane_of(request).secrets
    await _change(request, lambda: secrets.put(who.account, name, secret, who.source))
    return ok({"name": secret.name, "type": secret.type})


async def patch_secrets(request: Request) -> Response:
    """``PATCH .../secrets-bulk`` (wrangler 4's ``secret bulk``): ``{"secrets": {NAME:
    {name, text, type} | null}}``, a JSON merge patch applied as one new version."""
    who = caller(request)
    body = await json_body(request)
    secrets = body.get("secrets") if isinstance(body, dict) else None
    if not isinstance(secrets, dict):
        raise InvalidRequest(
            'expected {"secrets": {"NAME": {"name": "NAME", "text": "...", "type": '
            '"secret_text"} or null, ...}}'
        )
    if len(secrets) > MAX_BULK_SECRETS:
        raise InvalidRequest(
            f"a bulk secrets request takes at most {MAX_BULK_SECRETS} secrets, got {len(secrets)}"
        )
    changes = {key: _bulk_secret(key, value) for key, value in secrets.items()}
    name = request.path_params["name"]
    service = plane_of(request).secrets
    await _change(request, lambda: service.patch(who.account, name, changes, who.source))
    found = plane_of(request).secrets.list(who.account, name)
    return ok([{"name": found_name, "type": kind} for found_name, kind in found])


def _bulk_secret(key: str, value: object) -> SecretValue | None:
    """One member of the patch: null deletes; an object sets (its name, if any, must be the key)."""
    if value is None:
        return None
    if not (isinstance(value, dict) and isinstance(value.get("text"), str)):
        raise InvalidRequest(
            f'secret {key!r:.100} must be null or {{"name", "text": "...", "type": "secret_text"}}'
        )
    if value.get("name", key) != key:
        raise InvalidRequest(f"secret {key!r:.100} is named {value.get('name')!r:.100} inside")
    kind = value.get("type", "secret_text")
    return SecretValue(key, kind if isinstance(kind, str) else "<not a string>", value["text"])


async def delete_secret(request: Request) -> Response:
    who = caller(request)
    name, secret_name = request.path_params["name"], request.path_params["secret_name"]
    secrets = plane_of(request).secrets
    await _change(request, lambda: secrets.delete(who.account, name, secret_name, who.source))
    return ok(None)


async def _change(request: Request, change: Callable[[], DerivedVersion]) -> None:
    """Run a secret change (files, then the row) on an upload thread under the worker's upload
    lock, make it live, then remove the files of the versions it pruned."""
    who, name = caller(request), request.path_params["name"]
    uploads, live = uploads_of(request), live_of(request)

    async def apply() -> None:
        async with uploads.worker(who.account.id, name):
            changed = await uploads.run(change)
            await live.reconcile(who.account.id, name, warm=True)
            await uploads.remove_files(who.account.id, changed.pruned)

    await asyncio.shield(apply())


ROUTES = [
    Route(SECRETS, list_secrets, methods=["GET"]),
    Route(SECRETS, put_secret, methods=["PUT"]),
    Route(SECRETS_BULK, patch_secrets, methods=["PATCH"]),
    Route(SECRETS + "/{secret_name}", get_secret, methods=["GET"]),
    Route(SECRETS + "/{secret_name}", delete_secret, methods=["DELETE"]),
]
