"""What a tenant and the operator are told when a worker hits a limit (walk 7, section C): each
message names the limit that was hit, and every kill of an isolate leaves an operator log line."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

# 200 MB of console output from code that never awaits: far past the 128 MiB memory limit if the
# lines were held until the loop could send them.
PRINTER = """\
from workers import Response


async def on_fetch(request, env):
    for _ in range(100_000):
        print("x" * 2000)
    return Response("printed")
"""
HEADERS = """\
from workers import Response


async def on_fetch(request, env):
    return Response("h", headers={f"x-h{i}": "v" * 1000 for i in range(2000)})
"""
SPINNER = """\
import threading
from workers import Response


async def on_fetch(request, env):
    threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
    return Response("left a spinning thread")
"""
PLAIN = """\
from workers import Response


async def on_fetch(request, env):
    return Response("ok")
"""


@pytest.fixture(scope="module")
def account(serve: ServeProcess) -> Iterator[tuple[str, str]]:
    yield permanent_account(serve, "noisy")


def _deploy(serve: ServeProcess, account: tuple[str, str], name: str, source: str) -> None:
    with serve.api(account[1]) as api:
        reply = put_worker(api, account[0], name, source)
    assert reply.status_code == 200, reply.text


def test_console_output_faster_than_it_is_sent_waits_instead_of_using_memory(
    serve: ServeProcess, account: tuple[str, str]
) -> None:
    _deploy(serve, account, "printer", PRINTER)
    reply = serve.worker("noisy", "printer")
    assert (reply.status_code, reply.text) == (200, "printed")


def test_response_headers_over_the_limit_are_refused_by_name(
    serve: ServeProcess, account: tuple[str, str]
) -> None:
    _deploy(serve, account, "headers", HEADERS)
    reply = serve.worker("noisy", "headers")
    assert reply.status_code == 502
    assert reply.text == (
        "Worker response headers exceeded the limit (1000 headers, 128 KiB in all).\n"
    )


def test_inheriting_from_another_accounts_version_says_this_worker_has_no_such_version(
    serve: ServeProcess, account: tuple[str, str]
) -> None:
    victim_id, victim_token = permanent_account(serve, "inherited")
    with serve.api(victim_token) as api:
        secret = [{"name": "TOKEN", "type": "secret_text", "text": "theirs"}]
        assert put_worker(api, victim_id, "vault", PLAIN, bindings=secret).status_code == 200
        versions = api.get(f"/accounts/{victim_id}/workers/scripts/vault/versions")
    theirs = versions.json()["result"]["items"][0]["id"]
    inherit = [{"name": "TOKEN", "type": "inherit", "version_id": theirs}]
    with serve.api(account[1]) as api:
        _deploy(serve, account, "thief", PLAIN)
        refused = put_worker(api, account[0], "thief", PLAIN, bindings=inherit)
    assert refused.status_code == 400
    message = refused.json()["errors"][0]["message"]
    assert message == (
        f"binding 'TOKEN' is 'inherit' but this worker has no version '{theirs}' to inherit it "
        "from (bindings_inherit=strict)"
    )


def test_an_isolate_killed_for_idle_cpu_leaves_an_operator_log_line(
    serve: ServeProcess, account: tuple[str, str]
) -> None:
    _deploy(serve, account, "spinner", SPINNER)
    assert serve.worker("noisy", "spinner").text == "left a spinning thread"
    line = "[ember] spinner.noisy: isolate stopped: used "
    deadline = time.monotonic() + 60
    while line not in serve.output():
        assert time.monotonic() < deadline, serve.output()[-2000:]
        time.sleep(0.1)
    logged = serve.output().split(line, 1)[1].splitlines()[0]
    assert "of CPU with no request in flight (limit 50 ms: a thread or task left running" in logged
