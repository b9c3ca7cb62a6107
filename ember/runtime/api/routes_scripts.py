"""Workers: scripts, services, versions, deployments, settings and the workers.dev-style URL.

Both deploy paths of cloudflare-api.md §2: ``PUT .../scripts/{name}`` (first deploy, SDK update,
wrangler's secret-put draft; ember's sends ``If-None-Match: *``, create-only, refused with 412
when the Worker exists), whose ``deployment_id`` is the *version* id; and ``POST .../versions``
then ``POST .../deployments`` (redeploy, rollback).

Making a version live is two commits around a start: the version is stored, its isolate is
started (``LiveHooks.deploying``; a module that does not load is refused with code 10021 and
the stored version discarded), then the deployment that points at it is committed and the
route switched. A crash between the two leaves a stored version that is not live. Only then,
the version accepted, are the versions it pushed out of the worker's window pruned, rows
first, then files (``_prune``): a refused upload deletes nothing but itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api import serializers
from ember.runtime.api.context import (
    MULTIPART_OVERHEAD,
    Caller,
    caller,
    flag,
    json_body,
    live_of,
    plane_of,
    read_body,
    uploads_of,
    worker_url,
)
from ember.runtime.api.envelope import ok, page_info
from ember.runtime.api.routes_tail import hub_of
from ember.runtime.api.uploads import UploadRequest
from ember.runtime.deployments.errors import (
    BodyTooLarge,
    InvalidRequest,
    ScriptExists,
    ScriptNotFound,
    UploadTooLarge,
    VersionNotFound,
)
from ember.runtime.deployments.metadata_limits import check_extra
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Account, DeploymentTarget, Version
from ember.runtime.deployments.traffic import parse_targets
from ember.runtime.deployments.upload import MAX_ANNOTATION_CHARS

ACCOUNT = "/accounts/{account_id}"
SCRIPT = ACCOUNT + "/workers/scripts/{name}"


async def _live_version(request: Request, name: str) -> Version | None:
    """The version that answers (else the newest), read on an upload thread: a version's
    metadata holds both rule texts, up to 1 MiB each, and decoding them on the loop stalled
    every tenant (review18)."""
    who = caller(request)
    return await uploads_of(request).run(_live_version_now, plane_of(request), who.account, name)


def _live_version_now(plane: ControlPlane, account: Account, name: str) -> Version | None:
    live = plane.scripts.live(account, name)
    if live is None:
        versions = plane.scripts.versions(account, name)
        return versions[0] if versions else None
    return plane.scripts.version(account, name, live.versions[0].version_id)


async def _read_upload(request: Request, *, deploy: bool, create: bool = False) -> UploadRequest:
    """The upload as read from the wire; parsed and stored later, on an upload thread
    (``uploads.py``). Read before taking the worker's lock, so a slow client holds up nobody:
    uploads of one worker are stored in the order their bodies arrived, as before."""
    who = caller(request)
    plane = plane_of(request)
    limit = plane.config.limits_for(who.account.temporary).max_script_bytes
    try:
        body = await read_body(request, limit + MULTIPART_OVERHEAD)
    except BodyTooLarge as exc:
        raise UploadTooLarge(int(exc.observed), limit, who.account.temporary) from None
    return UploadRequest(
        account=who.account,
        name=request.path_params["name"],
        body=body,
        content_type=request.headers.get("content-type"),
        deploy=deploy,
        create=create,
        source=who.source,
        strict_inherit=request.query_params.get("bindings_inherit") == "strict",
    )


async def _discard(request: Request, name: str, version_id: str) -> None:
    """Drop a stored version that was refused; shielded, so a client that hangs up while it
    runs cannot leave the version (and its files) half removed."""
    uploads = uploads_of(request)
    await asyncio.shield(uploads.discard(caller(request).account, name, version_id))


async def _prune(request: Request, name: str) -> None:
    """Prune the worker's window after an accepted upload (under the worker's upload lock,
    after any route switch); shielded like ``_discard``, so rows and files go together."""
    uploads = uploads_of(request)
    await asyncio.shield(uploads.prune(caller(request).account, name))


async def put_script(request: Request) -> Response:
    who = caller(request)
    plane = plane_of(request)
    name = request.path_params["name"]
    upload = await _read_upload(request, deploy=False, create=True)
    async with uploads_of(request).worker(who.account.id, name):
        if request.headers.get("if-none-match", "").strip() == "*" and _exists(plane, who, name):
            raise ScriptExists(name)  # checked under the worker's upload lock: no race
        version = (await uploads_of(request).store(upload)).version
        started = time.perf_counter()
        try:
            async with live_of(request).deploying(who.account, name, [version.id], uploaded=True):
                message = version.annotations.get("workers/message")
                plane.scripts.deploy(
                    who.account,
                    name,
                    [DeploymentTarget(version.id, 100.0)],
                    {"workers/message": message} if message else {},
                    force=False,
                    source=who.source,
                    triggered_by="upload",  # Cloudflare's tag for a deploy (Scripts PUT)
                )
        except BaseException:
            await _discard(request, name, version.id)
            raise
        await _prune(request, name)  # live and routed: ``deploying`` reconciled on its way out
    body = serializers.script(plane.scripts.get(who.account, name), version)
    body["deployment_id"] = version.id  # wrangler reads this as the version id
    body["startup_time_ms"] = round((time.perf_counter() - started) * 1000)
    return ok(body)


def _exists(plane: ControlPlane, who: Caller, name: str) -> bool:
    try:
        plane.scripts.get(who.account, name)
    except ScriptNotFound:
        return False
    return True


async def list_scripts(request: Request) -> Response:
    who = caller(request)
    plane = plane_of(request)

    def listed() -> list[dict[str, Any]]:
        return [
            serializers.script(s, _live_version_now(plane, who.account, s.name))
            for s in plane.scripts.list(who.account)
        ]

    return ok(await uploads_of(request).run(listed))


async def get_script_content(request: Request) -> Response:
    """The raw main module (``GET .../scripts/{name}``), as Cloudflare returns script content."""
    version = await _live_version(request, request.path_params["name"])
    if version is None:
        raise InvalidRequest("this Worker has no version yet")
    module = next(
        m for m in plane_of(request).scripts.modules(version.id) if m.name == version.main_module
    )
    return Response(module.content, media_type=module.content_type)


async def get_service(request: Request) -> Response:
    who = caller(request)
    name = request.path_params["name"]
    script = plane_of(request).scripts.get(who.account, name)
    return ok(serializers.service(script, await _live_version(request, name)))


async def delete_script(request: Request) -> Response:
    who = caller(request)
    name = request.path_params["name"]
    plane = plane_of(request)
    script = plane.scripts.get(who.account, name)
    versions = plane.scripts.delete(who.account, name)
    # Its open tails end now, as the sweep ends a deleted worker's: they would stream nothing.
    hub_of(request.app.state).close_script(script.id)
    await live_of(request).reconcile(who.account.id, name)  # drains its isolates first
    await uploads_of(request).remove_files(who.account.id, tuple(versions))
    return ok(None)


async def account_subdomain(request: Request) -> Response:
    return ok({"subdomain": caller(request).account.name})


async def get_worker(request: Request) -> Response:
    """The "Workers" resource; ``subdomain.url`` makes wrangler print the routable hostname."""
    who = caller(request)
    name = request.path_params["name"]
    script = plane_of(request).scripts.get(who.account, name)
    subdomain = {"enabled": script.subdomain_enabled, "previews_enabled": script.previews_enabled}
    if script.subdomain_enabled:
        subdomain["url"] = worker_url(request, who.account, name)
    return ok(
        {
            "id": script.id,
            "name": script.name,
            "subdomain": subdomain,
            "created_on": serializers.iso(script.created_on),
            "updated_on": serializers.iso(script.modified_on),
            "tags": [],
        }
    )


async def script_subdomain(request: Request) -> Response:
    who = caller(request)
    plane = plane_of(request)
    name = request.path_params["name"]
    if request.method == "POST":
        body = await json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("enabled"), bool):
            raise InvalidRequest('expected {"enabled": true|false, "previews_enabled"?: bool}')
        script = plane.scripts.get(who.account, name)
        script = plane.scripts.set_subdomain(
            who.account,
            name,
            body["enabled"],
            bool(body.get("previews_enabled", script.previews_enabled)),
        )
    else:
        script = plane.scripts.get(who.account, name)
    return ok({"enabled": script.subdomain_enabled, "previews_enabled": script.previews_enabled})


async def post_version(request: Request) -> Response:
    who = caller(request)
    name = request.path_params["name"]
    upload = await _read_upload(request, deploy=False)
    async with uploads_of(request).worker(who.account.id, name):
        result = await uploads_of(request).store(upload)
        try:
            await live_of(request).prepare(who.account, name, result.version.id)
        except BaseException:
            await _discard(request, name, result.version.id)
            raise
        await _prune(request, name)  # started; pruned versions are not live (no route moves)
    return ok(serializers.version(result.version, who.account, result.script))


async def list_versions(request: Request) -> Response:
    who = caller(request)
    plane = plane_of(request)
    name = request.path_params["name"]
    script = plane.scripts.get(who.account, name)

    def listed() -> list[dict[str, Any]]:  # every version's metadata: on a thread
        return [
            serializers.version(v, who.account, script)
            for v in plane.scripts.versions(who.account, name)
        ]

    items = await uploads_of(request).run(listed)
    return ok({"items": items}, result_info=page_info(items, 1, max(len(items), 1), len(items)))


async def get_version(request: Request) -> Response:
    who = caller(request)
    plane = plane_of(request)
    name = request.path_params["name"]
    script = plane.scripts.get(who.account, name)
    version = await uploads_of(request).run(
        plane.scripts.version, who.account, name, request.path_params["version_id"]
    )
    return ok(serializers.version(version, who.account, script))


async def list_deployments(request: Request) -> Response:
    who = caller(request)
    found = plane_of(request).scripts.deployments(who.account, request.path_params["name"])
    return ok({"deployments": [serializers.deployment(d) for d in found]})


async def post_deployment(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    if not isinstance(body, dict) or body.get("strategy", "percentage") != "percentage":
        raise InvalidRequest('expected {"strategy": "percentage", "versions": [...]}')
    targets = parse_targets(body.get("versions"))
    annotations = body.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise InvalidRequest("annotations must be an object")
    message = annotations.get("workers/message")
    if message is not None and len(str(message)) > MAX_ANNOTATION_CHARS:
        raise InvalidRequest(
            f'annotations["workers/message"] is longer than {MAX_ANNOTATION_CHARS} characters'
        )
    name = request.path_params["name"]
    plane = plane_of(request)
    plane.scripts.get(who.account, name)  # an unknown worker is 10007, as wrangler expects
    for index, target in enumerate(targets):  # checked before anything is started
        try:
            plane.scripts.version(who.account, name, target.version_id)
        except VersionNotFound as exc:
            raise InvalidRequest(
                f"versions[{index}].version_id {target.version_id!r} is not a version of "
                f"Worker {name!r} (see GET .../workers/scripts/{name}/versions)"
                + (f"; {exc.note}" if exc.note else "")
            ) from None
    async with live_of(request).deploying(who.account, name, [t.version_id for t in targets]):
        deployment = plane.scripts.deploy(
            who.account,
            name,
            targets,
            {k: str(v) for k, v in annotations.items()},
            force=flag(request, "force"),
            source=who.source,
        )
    return ok(serializers.deployment(deployment))


async def get_settings(request: Request) -> Response:
    who = caller(request)
    name = request.path_params["name"]
    script = plane_of(request).scripts.get(who.account, name)
    return ok(serializers.settings(script, await _live_version(request, name)))


async def patch_script_settings(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest("expected a JSON object of settings")
    allowed = {
        k: v for k, v in body.items() if k in ("tags", "observability", "logpush", "tail_consumers")
    }
    check_extra(allowed)  # bounded as an upload's metadata is: stored with the Worker
    name = request.path_params["name"]
    script = plane_of(request).scripts.patch_settings(who.account, name, allowed)
    return ok(serializers.settings(script, await _live_version(request, name)))


async def patch_worker(request: Request) -> Response:
    """``PATCH .../workers/workers/{name}`` (preview URLs): accepted, nothing else to change."""
    return await get_worker(request)


ROUTES = [
    Route(ACCOUNT + "/workers/scripts", list_scripts, methods=["GET"]),
    Route(SCRIPT, put_script, methods=["PUT"]),
    Route(SCRIPT, get_script_content, methods=["GET"]),
    Route(SCRIPT, delete_script, methods=["DELETE"]),
    Route(ACCOUNT + "/workers/services/{name}", get_service, methods=["GET"]),
    Route(ACCOUNT + "/workers/services/{name}", delete_script, methods=["DELETE"]),
    Route(ACCOUNT + "/workers/subdomain", account_subdomain, methods=["GET"]),
    Route(ACCOUNT + "/workers/workers/{name}", get_worker, methods=["GET"]),
    Route(ACCOUNT + "/workers/workers/{name}", patch_worker, methods=["PATCH"]),
    Route(SCRIPT + "/subdomain", script_subdomain, methods=["GET", "POST"]),
    Route(SCRIPT + "/versions", post_version, methods=["POST"]),
    Route(SCRIPT + "/versions", list_versions, methods=["GET"]),
    Route(SCRIPT + "/versions/{version_id}", get_version, methods=["GET"]),
    Route(SCRIPT + "/deployments", list_deployments, methods=["GET"]),
    Route(SCRIPT + "/deployments", post_deployment, methods=["POST"]),
    Route(SCRIPT + "/settings", get_settings, methods=["GET"]),
    Route(SCRIPT + "/script-settings", get_settings, methods=["GET"]),
    Route(SCRIPT + "/script-settings", patch_script_settings, methods=["PATCH"]),
]
