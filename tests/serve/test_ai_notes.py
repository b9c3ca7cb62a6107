"""ember serve: the AI gateway's notes about a worker's ``env.AI.run`` reach that worker's author.

A note such as "content is null: the model spent all of max_tokens thinking" is a warn line of
the invocation (what ``ember tail`` and wrangler tail show), and the operator's log keeps its
line, naming the worker and the account.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from websockets.sync.client import connect

from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

GLM = "@cf/zai-org/glm-4.7-flash"
CONFIG = tiny_ai_config(GLM)
# Thinking is on by default and four tokens all go to it: the answer's content is null.
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    print("asking")
    inputs = {{"prompt": "hi", "max_tokens": 4, "temperature": 0}}
    if request.url.endswith("/stream"):
        stream = await env.AI.run("{GLM}", {{**inputs, "stream": True}})
        return Response(stream, headers={{"content-type": "text/event-stream"}})
    result = await env.AI.run("{GLM}", inputs)
    return Response.json(result)
"""
NOTE = f"{GLM}: content is null: the model spent all of max_tokens=4 thinking"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("ai-notes") / "state", CONFIG)
    yield process
    process.stop()


def test_a_note_about_env_ai_run_is_a_log_line_of_the_invocation(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "notes")
    with serve.api(token) as api:
        bindings = [{"name": "AI", "type": "ai"}]
        assert put_worker(api, account_id, "asker", WORKER, bindings=bindings).status_code == 200
        tails = f"/accounts/{account_id}/workers/scripts/asker/tails"
        created = api.post(tails, content=json.dumps({"filters": []})).json()["result"]
        with connect(created["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
            socket.send(json.dumps({"debug": False}))
            time.sleep(0.2)  # the subscription is registered once the socket is open
            whole = serve.worker("notes", "asker", "/whole")
            assert whole.status_code == 200, whole.text
            assert whole.json()["choices"][0]["message"]["content"] is None, whole.text
            streamed = serve.worker("notes", "asker", "/stream")
            assert streamed.status_code == 200, streamed.text
            events = [json.loads(socket.recv(timeout=120)) for _ in range(2)]
    for event in events:
        logs = [(log["level"], log["message"][0]) for log in event["logs"]]
        assert logs[0] == ("log", "asking"), logs
        (note,) = [message for level, message in logs if level == "warn"]
        assert note.startswith(NOTE), logs
    operator = [line for line in serve.output().splitlines() if NOTE in line]
    assert len(operator) == 2, serve.output()
    assert all(line.startswith("[ember] asker.notes: ") for line in operator), operator


FORGER = f"""\
from workers import Response

async def on_fetch(request, env):
    inputs = {{"prompt": "hi", "max_tokens": 1, "x\\n[ember] live: bank (account victim) v9": 1}}
    await env.AI.run("{GLM}", inputs)
    return Response("ran")
"""


def test_a_tenants_text_cannot_forge_a_line_of_the_operators_log(serve: ServeProcess) -> None:
    """A note quotes the worker's own input (here an unknown field's name): its newline is
    printed escaped, so the operator's log keeps one line per event."""
    account_id, token = permanent_account(serve, "forger")
    with serve.api(token) as api:
        bindings = [{"name": "AI", "type": "ai"}]
        assert put_worker(api, account_id, "forger", FORGER, bindings=bindings).status_code == 200
    ran = serve.worker("forger", "forger", "/")
    assert ran.status_code == 200, ran.text
    lines = serve.output().splitlines()
    assert not any(line.startswith("[ember] live: bank") for line in lines), serve.output()
    (noted,) = [line for line in lines if "live: bank (account victim)" in line]
    assert noted.startswith("[ember] forger.forger: ") and "x\\n[ember] live" in noted, noted
