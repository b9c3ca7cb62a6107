"""A traced invocation's logs are bounded in the supervisor: a worker printing in a loop while a
tail watches gets one event marked ``truncated``, not an event as large as everything it printed
(held whole in the process every tenant shares, then queued for each tail)."""

from __future__ import annotations

import json
import time

from websockets.sync.client import connect

from ember.runtime.hooks import TRACE_BYTES
from tests.serve.conftest import ServeProcess, permanent_account, put_worker

NOISY = """\
from workers import Response


async def on_fetch(request, env):
    line = "x" * 60000
    for i in range(200):  # 12 MB of console output in one request
        print(i, line)
    return Response("done")
"""


def test_a_noisy_invocation_reaches_the_tail_truncated(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "noisy")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "loud", NOISY).status_code == 200
        tails = f"/accounts/{account_id}/workers/scripts/loud/tails"
        created = api.post(tails, json={"filters": []}).json()["result"]
        with connect(created["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
            socket.send(json.dumps({"debug": False}))
            time.sleep(0.2)  # the subscription is registered once the socket is open
            assert serve.worker("noisy", "loud").text == "done"
            event = json.loads(socket.recv(timeout=60))
        api.delete(f"{tails}/{created['id']}")
    assert event["outcome"] == "ok" and event["truncated"] is True
    logged = [entry["message"][0] for entry in event["logs"]]
    assert logged and logged[0].startswith("0 xxx")
    assert sum(len(m) for m in logged) <= TRACE_BYTES
