"""On ``ember serve`` an isolate sends at most 256,000 characters of console output a second
(Cloudflare keeps 256 KB of an invocation's logs): a worker printing in a loop (walk18: the
supervisor every tenant shares spent a third of a core on its lines, and the others' p99 went
from 12 to 118-261 ms) reaches its tail with what fit and one line saying how much was dropped,
and a worker's ordinary logs reach the tail exactly as before."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from websockets.sync.client import connect

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

LINES = 20_000
FLOOD = f"""\
import sys
from workers import Response


async def on_fetch(request, env):
    for _ in range({LINES}):
        print("x" * 99, file=sys.stderr)
    return Response("printed")
"""
CHATTY = """\
import sys
import js
from workers import Response


async def on_fetch(request, env):
    for i in range(50):
        print("line", i)
    print("to stderr", file=sys.stderr)
    js.console.warn("careful", 42)
    return Response("chatted")
"""
NOTICE = re.compile(
    r"\[ember\] ([\d,]+) console lines \(([\d,]+) characters\) dropped: an isolate sends at "
    r"most 256,000 characters of console output a second \(each line counts as at least 64\)"
)


def _tail_one(serve: ServeProcess, account: str, worker: str, source: str) -> dict[str, Any]:
    """The tail event of one request to a new ``worker`` that runs ``source``."""
    account_id, token = permanent_account(serve, account)
    with serve.api(token) as api:
        assert put_worker(api, account_id, worker, source).status_code == 200
        tails = f"/accounts/{account_id}/workers/scripts/{worker}/tails"
        created = api.post(tails, json={"filters": []}).json()["result"]
        with connect(created["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
            socket.send(json.dumps({"debug": False}))
            time.sleep(0.2)  # the subscription is registered once the socket is open
            assert serve.worker(account, worker).status_code == 200
            event: dict[str, Any] = json.loads(socket.recv(timeout=60))
        api.delete(f"{tails}/{created['id']}")
    return event


def test_a_print_flood_reaches_the_tail_cut_with_one_line_saying_so(serve: ServeProcess) -> None:
    event = _tail_one(serve, "flooder", "loud", FLOOD)
    logs = [(entry["level"], entry["message"][0]) for entry in event["logs"]]
    kept = [m for level, m in logs if (level, m) == ("error", "x" * 99)]
    notices = [NOTICE.fullmatch(m) for level, m in logs if level == "warn"]
    assert notices and all(notices), logs[-3:]
    dropped = sum(int(found[1].replace(",", "")) for found in notices if found)
    assert len(kept) + dropped == LINES, (len(kept), dropped)
    assert 0 < len(kept) * 99 <= 256_000 * len(notices)  # one window each, at most
    assert logs[-1][0] == "warn" and event["truncated"] is True


def test_ordinary_logs_reach_the_tail_as_before(serve: ServeProcess) -> None:
    event = _tail_one(serve, "chatter", "chatty", CHATTY)
    logs = [(entry["level"], entry["message"]) for entry in event["logs"]]
    assert logs == [
        *(("log", [f"line {i}"]) for i in range(50)),
        ("error", ["to stderr"]),
        ("warn", ["careful 42"]),
    ]
    assert event["truncated"] is False and event["outcome"] == "ok"
