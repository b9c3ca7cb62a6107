"""``wrangler tail``: create and delete tail sessions, and the ``trace-v1`` WebSocket.

A socket ends with 1000 "the tail session ended" whenever its session does: deleted, replaced,
revoked by a claim, its worker deleted (through the API or by the sweep), its six hours up, or its
temporary account expired. The last two are timed here, because nothing else ends the socket
then (the sweep that deletes an expired account may run much later, ``--gc-interval``) and a
socket left open streamed nothing, silently.
"""

from __future__ import annotations

import asyncio
import contextlib

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ember.errors import EmberError
from ember.runtime.api import serializers
from ember.runtime.api.context import (
    JSON_BODY_LIMIT,
    caller,
    parse_json,
    plane_of,
    public_origin,
    read_body,
)
from ember.runtime.api.envelope import ok
from ember.runtime.deployments.tail_events import (
    CLOSED,
    MAX_SOCKETS_PER_SCRIPT,
    TailHub,
    TooManyTails,
)

TAILS = "/accounts/{account_id}/workers/scripts/{name}/tails"
WS_PATH = "/tail-ws/{tail_id}"
SUBPROTOCOL = "trace-v1"
ENDED = "the tail session ended"  # the close reason whatever ended it


def hub_of(app_state: object) -> TailHub:
    return app_state.tail_hub  # type: ignore[attr-defined]


async def create_tail(request: Request) -> Response:
    who = caller(request)
    raw = await read_body(request, JSON_BODY_LIMIT)  # JSON sent as text/plain by wrangler
    body = parse_json(raw, "the tail filters") if raw.strip() else {}
    tail = plane_of(request).tails.create(who.account, request.path_params["name"], body)
    hub_of(request.app.state).close_tails(tail.ended)
    origin = public_origin(request).replace("https://", "wss://").replace("http://", "ws://")
    api_root = request.scope.get("root_path", "")  # the API's mount point, e.g. /client/v4
    return ok(
        {
            "id": tail.id,
            "url": f"{origin}{api_root}{WS_PATH.format(tail_id=tail.id)}",
            "expires_at": serializers.iso(tail.expires_at),
        }
    )


async def delete_tail(request: Request) -> Response:
    who = caller(request)
    tail_id = request.path_params["tail_id"]
    plane_of(request).tails.delete(who.account, request.path_params["name"], tail_id)
    hub_of(request.app.state).close_tails([tail_id])  # a deleted session stops streaming too
    return ok(None)


async def tail_socket(websocket: WebSocket) -> None:
    plane = websocket.app.state.plane
    try:
        tail, _script = plane.tails.open(websocket.path_params["tail_id"])
    except EmberError:
        await websocket.close(code=4404)
        return
    offered = websocket.scope.get("subprotocols", [])
    hub = hub_of(websocket.app.state)
    try:
        queue = hub.subscribe(tail)
    except TooManyTails:
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        await websocket.close(
            code=1013, reason=f"at most {MAX_SOCKETS_PER_SCRIPT} tails per Worker at once"
        )
        return
    reader: asyncio.Task[None] | None = None
    try:
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        reader = asyncio.create_task(_drain_client(websocket))
        while not reader.done():
            getter = asyncio.create_task(queue.get())
            # The session's own end (six hours after it was made, as Cloudflare's), or its
            # temporary account's expiry if that comes first.
            ends = min(tail.expires_at, tail.account_expires_at or tail.expires_at)
            left = max(0.0, ends - plane.clock())
            done, _ = await asyncio.wait(
                {getter, reader}, timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            if getter in done:
                payload = getter.result()
                if payload is CLOSED:
                    await websocket.close(code=1000, reason=ENDED)
                    break
                await websocket.send_text(payload)  # type: ignore[arg-type]
                continue
            getter.cancel()
            if not done:  # the session's time is up, or its account expired
                await websocket.close(code=1000, reason=ENDED)
                break
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        hub.unsubscribe(tail, queue)  # also when the client left during the handshake
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await reader


async def _drain_client(websocket: WebSocket) -> None:
    """Read (and ignore) client frames such as ``{"debug": false}`` until it disconnects."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return


ROUTES = [
    Route(TAILS, create_tail, methods=["POST"]),
    Route(TAILS + "/{tail_id}", delete_tail, methods=["DELETE"]),
]
WS_ROUTES = [WebSocketRoute(WS_PATH, tail_socket)]
