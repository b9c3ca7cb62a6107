"""Static assets uploads (``wrangler deploy`` and ``ember deploy`` of a project with ``assets``).

``assets-upload-session`` takes the manifest with the account's API token and answers which
files to send; ``workers/assets/upload`` takes the files with the session's own token (as on
Cloudflare, the upload is authorised by it, not by the API token). The work (parsing the form,
decoding and writing files) runs on the upload threads (``uploads.store_assets``), off the event
loop every tenant is served from, as a Worker upload's does (``uploads.store_upload``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api.context import (
    bearer,
    caller,
    parse_json,
    plane_of,
    read_body,
    read_chunks,
    uploads_of,
)
from ember.runtime.api.envelope import ok
from ember.runtime.api.uploads import AssetUpload
from ember.runtime.deployments.errors import InvalidRequest

ACCOUNT = "/accounts/{account_id}"
MANIFEST_BODY_LIMIT = 32 * 1024 * 1024  # 100,000 entries of a long path, hash and size
# A temporary account's manifest lists at most 1,000 files (~1.1 MB at the longest paths): a
# larger body is refused before it is read, not parsed (holding the interpreter ~0.2 s) first.
TEMPORARY_MANIFEST_BODY_LIMIT = 2 * 1024 * 1024
UPLOAD_BODY_LIMIT = 64 * 1024 * 1024  # a bucket (40 MiB of files) in base64, and its form


async def upload_session(request: Request) -> Response:
    who = caller(request)
    plane = plane_of(request)
    limit = TEMPORARY_MANIFEST_BODY_LIMIT if who.account.temporary else MANIFEST_BODY_LIMIT
    raw = await read_body(request, limit)

    def start() -> object:  # on an upload thread: a 32 MiB manifest parses for ~0.3 s
        return plane.start_assets(who.account, parse_json(raw, "the request body"))

    return ok(await uploads_of(request).run(start))


async def upload_files(request: Request) -> Response:
    plane = plane_of(request)
    account_id = request.path_params["account_id"]
    if request.query_params.get("base64") != "true":
        raise InvalidRequest("send the files base64-encoded, with ?base64=true (as wrangler does)")
    token = bearer(request)
    plane.assets.session(account_id, token)  # no session, no 64 MiB read (a dict look-up)
    chunks = await read_chunks(request, UPLOAD_BODY_LIMIT)
    upload = AssetUpload(account_id, token, chunks, request.headers.get("content-type"))
    completion = await uploads_of(request).assets(upload)
    if completion is None:
        return ok({}, status=202)
    return ok({"jwt": completion}, status=201)


ROUTES = [
    Route(
        ACCOUNT + "/workers/scripts/{name}/assets-upload-session",
        upload_session,
        methods=["POST"],
    ),
    Route(ACCOUNT + "/workers/assets/upload", upload_files, methods=["POST"]),
]
