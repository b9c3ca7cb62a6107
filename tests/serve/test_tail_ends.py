"""A tail socket ends when its worker is deleted through the API (wrangler delete / ember
delete), with the same 1000 "the tail session ended" as when the sweep deletes it: before,
only the sweep closed a deleted worker's sockets, and one deleted through the API stayed open
streaming nothing."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("watched")
"""


def test_deleting_the_worker_closes_its_tail(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "tailends")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "gone", WORKER).status_code == 200
        script = f"/accounts/{account_id}/workers/scripts/gone"
        created = api.post(f"{script}/tails", content=json.dumps({"filters": []})).json()
        # The socket is subscribed before its handshake completes.
        with connect(created["result"]["url"], subprotocols=["trace-v1"]) as socket:
            socket.send(json.dumps({"debug": False}))
            assert api.delete(script).status_code == 200
            with pytest.raises(ConnectionClosed) as closed:
                socket.recv(timeout=60)
    assert closed.value.rcvd is not None, closed.value
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1000, "the tail session ended")
