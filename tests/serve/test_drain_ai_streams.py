"""SIGTERM on ember serve while AI streams are still generating: when ``drain_timeout_s`` runs
out, each of them (a worker's piped ``env.AI.run`` stream, REST ``ai/run``, ``/ai/v1``) ends on
an event boundary with the usual error event and ``[DONE]``, and its response completes: no
half a JSON event, no truncated chunked encoding."""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass, field

import httpx
import pytest

from tests.serve.conftest import BASE_CONFIG, TINY_GLM, ServeProcess, permanent_account, put_worker

MODEL = "@cf/zai-org/glm-4.7-flash"
# One second of drain, and answers that take far longer than that: generating to the end of
# the window (ignore_eos) on one thread.
CONFIG = (
    BASE_CONFIG
    + f"""\
ai:
  pool: {{drain_timeout_s: 1}}
  models:
    "{MODEL}":
      checkpoint: {TINY_GLM}
      args: ["--torch-threads", "1", "--kv-cache-bytes", "64MiB"]
"""
)
LONG = {"max_tokens": 3500, "ignore_eos": True, "temperature": 1.0}
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    inputs = {{"prompt": "def", "stream": True, **{LONG!r}}}
    stream = await env.AI.run("{MODEL}", inputs)
    return Response(stream, headers={{"content-type": "text/event-stream"}})
"""


@dataclass
class Listener:
    """One streaming client: the lines it read, and how its response ended."""

    name: str
    started: threading.Event = field(default_factory=threading.Event)
    lines: list[str] = field(default_factory=list)
    failure: str | None = None


def _listen(listener: Listener, method: str, url: str, **kw: object) -> None:
    try:
        with httpx.stream(method, url, timeout=300, **kw) as reply:  # type: ignore[arg-type]
            if reply.status_code != 200:
                listener.failure = f"{reply.status_code}: {reply.read()!r}"
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    listener.lines.append(line)
                    listener.started.set()
    except httpx.HTTPError as exc:
        listener.failure = f"{type(exc).__name__}: {exc}"
    listener.started.set()


def _ended_with_shutdown_error(listener: Listener, key: str) -> None:
    assert listener.failure is None, (listener.name, listener.failure, listener.lines[-2:])
    assert len(listener.lines) > 3, (listener.name, listener.lines)
    *events, error, done = listener.lines
    assert done == "data: [DONE]", (listener.name, listener.lines[-3:])
    for event in events:  # every event is whole: the cut fell between two of them
        assert isinstance(json.loads(event.removeprefix("data: ")), dict), (listener.name, event)
    body = json.loads(error.removeprefix("data: "))
    failure = body[key][0] if key == "errors" else body[key]
    assert failure["code"] == 3040, (listener.name, body)
    assert "the platform is shutting down" in failure["message"], (listener.name, body)


def test_ai_streams_cut_by_the_drain_deadline_end_with_an_error_event(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    serve = ServeProcess(tmp_path_factory.mktemp("drain-ai") / "state", CONFIG)
    try:
        account_id, token = permanent_account(serve, "drainai")
        with serve.api(token) as api:
            bindings = [{"name": "AI", "type": "ai"}]
            assert (
                put_worker(api, account_id, "piper", WORKER, bindings=bindings).status_code == 200
            )
        auth = {"authorization": f"Bearer {token}"}
        messages = [{"role": "user", "content": "def"}]
        worker = Listener("worker")
        rest = Listener("rest")
        openai = Listener("openai")
        clients = [
            (worker, "GET", serve.url + "/", {"headers": {"host": "piper.drainai.localhost"}}),
            (
                rest,
                "POST",
                f"{serve.url}/client/v4/accounts/{account_id}/ai/run/{MODEL}",
                {"headers": auth, "json": {"messages": messages, "stream": True, **LONG}},
            ),
            (
                openai,
                "POST",
                serve.url + "/ai/v1/chat/completions",
                {
                    "headers": auth,
                    "json": {"model": MODEL, "messages": messages, "stream": True, **LONG},
                },
            ),
        ]
        threads = []
        for listener, method, url, kw in clients:
            thread = threading.Thread(target=_listen, args=(listener, method, url), kwargs=kw)
            thread.daemon = True
            thread.start()
            threads.append(thread)
        for listener, *_ in clients:
            assert listener.started.wait(300), listener.name
            assert listener.failure is None and listener.lines, (listener.name, listener.failure)
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        serve.proc.wait(120)
        for thread in threads:
            thread.join(60)
    finally:
        serve.stop()
    log = serve.output()
    assert "drain timed out after 1 s, closing 3 requests" in log, log[-3000:]
    _ended_with_shutdown_error(worker, "errors")
    _ended_with_shutdown_error(rest, "errors")
    _ended_with_shutdown_error(openai, "error")
    assert "Traceback" not in log, log[-3000:]
