"""``tail`` on ember serve: the trace-v1 WebSocket carries real invocations as they happen."""

from __future__ import annotations

import json
import time

from websockets.sync.client import connect

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """\
from workers import Response
import js

async def on_fetch(request, env):
    print("handling", request.method)
    js.console.error("an error line")
    if request.url.endswith("/boom"):
        raise KeyError("missing thing")
    return Response("fine", status=202)

async def on_scheduled(controller, env, ctx):
    print("cron ran:", controller.cron)
"""


def test_tail_receives_requests_logs_exceptions_and_crons(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "tails")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "watched", WORKER).status_code == 200
        tails = f"/accounts/{account_id}/workers/scripts/watched/tails"
        created = api.post(
            tails,
            content=json.dumps({"filters": []}),
            headers={"content-type": "text/plain;charset=UTF-8"},
        ).json()["result"]
        assert created["url"].startswith("ws://127.0.0.1:")
        with connect(created["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
            assert socket.subprotocol == "trace-v1"
            socket.send(json.dumps({"debug": False}))
            time.sleep(0.2)  # the subscription is registered once the socket is open
            assert serve.worker("tails", "watched", "/ok", headers={"x-who": "me"}).text == "fine"
            assert serve.worker("tails", "watched", "/boom").status_code == 500
            ran = api.post(
                f"/accounts/{account_id}/workers/scripts/watched/scheduled",
                json={"cron": "*/10 * * * *"},
            ).json()["result"]
            assert ran["outcome"] == "ok"
            events = [json.loads(socket.recv(timeout=30)) for _ in range(3)]
        assert api.delete(f"{tails}/{created['id']}").status_code == 200
    ok, failed, cron = events
    assert ok["scriptName"] == "watched" and ok["outcome"] == "ok"
    assert ok["event"]["request"]["url"].endswith("/ok")
    assert ok["event"]["request"]["headers"]["x-who"] == "me"
    assert ok["event"]["response"] == {"status": 202}
    assert [(log["level"], log["message"]) for log in ok["logs"]] == [
        ("log", ["handling GET"]),
        ("error", ["an error line"]),
    ]
    assert ok["scriptVersion"]["id"] and ok["eventTimestamp"] > 0
    assert failed["outcome"] == "exception" and failed["event"]["response"]["status"] == 500
    assert failed["exceptions"][0]["name"] == "KeyError"
    assert "missing thing" in failed["exceptions"][0]["message"]
    assert cron["event"]["cron"] == "*/10 * * * *" and cron["event"]["scheduledTime"] > 0
    assert cron["logs"][0]["message"] == ["cron ran: */10 * * * *"]
