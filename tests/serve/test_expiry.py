"""A temporary account is gone the moment it expires, whenever the sweep that deletes its data
runs: its workers answer the 404 of a worker that is not live, its API token the 401 of a token
the platform does not know, a tail URL got before expiry no longer opens, and a tail socket open
at expiry is closed then, as a tail whose worker was deleted is. The sweep runs once at start and
then not for an hour here, so nothing in this test is the sweep's doing."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.serve.conftest import ServeProcess, put_worker, temporary_account

TTL_S = 10  # long enough to deploy on a loaded machine; the test waits it out once
CONFIG = f"""\
platform:
  proof_of_work: {{k: 64, g: 64, sample: 8}}
  temporary: {{ttl: {TTL_S}s}}
"""
WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("alive")
"""


def test_an_expired_temporary_account_is_gone_before_the_sweep(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG, "--gc-interval", "3600")
    try:
        created = temporary_account(serve)
        account = created["account"]  # type: ignore[index]
        account_id, name, token = account["id"], account["name"], account["apiToken"]  # type: ignore[index]
        expires = datetime.fromisoformat(account["expiresAt"].replace("Z", "+00:00"))  # type: ignore[index]
        with serve.api(token) as api:
            assert put_worker(api, account_id, "hello", WORKER).status_code == 200
            tail = api.post(
                f"/accounts/{account_id}/workers/scripts/hello/tails", content="{}"
            ).json()["result"]
        with connect(tail["url"], subprotocols=["trace-v1"], open_timeout=30) as watching:
            watching.send(json.dumps({"debug": False}))
            live = serve.worker(name, "hello")
            path_live = serve.worker("", "", f"/w/{name}/hello/", headers={"host": "127.0.0.1"})
            assert time.time() < expires.timestamp(), "setup outlasted the TTL: raise TTL_S"
            assert (live.text, path_live.text) == ("alive", "alive")
            streamed = [json.loads(watching.recv(timeout=30))["outcome"] for _ in range(2)]
            assert streamed == ["ok", "ok"]

            time.sleep(max(0.0, expires.timestamp() - time.time()) + 0.5)

            with pytest.raises(ConnectionClosed) as closed:  # at expiry, not at the sweep
                watching.recv(timeout=30)
        assert closed.value.rcvd is not None, closed.value
        ended = (closed.value.rcvd.code, closed.value.rcvd.reason)
        assert ended == (1000, "the tail session ended"), ended

        gone = serve.worker(name, "hello")
        never = serve.worker(name, "never-deployed")
        assert gone.status_code == 404, gone.text
        assert gone.text == never.text.replace("never-deployed", "hello")
        by_path = serve.worker("", "", f"/w/{name}/hello/", headers={"host": "127.0.0.1"})
        assert by_path.status_code == 404, by_path.text
        with serve.api(token) as api:
            refused = api.get(f"/accounts/{account_id}/workers/scripts")
        with serve.api("ember_not-a-token-of-anybody") as api:
            unknown = api.get(f"/accounts/{account_id}/workers/scripts")
        assert refused.status_code == 401
        assert refused.json()["errors"] == unknown.json()["errors"], refused.text
        with pytest.raises(InvalidStatus):
            with connect(tail["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
                socket.recv(timeout=10)
        assert "deleted expired temporary account" not in serve.output()
    finally:
        serve.stop()
