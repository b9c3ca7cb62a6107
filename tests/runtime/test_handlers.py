"""The three handler styles, the Request/Response API, and the isolate-only modules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.runtime.harness import Harness, write_project


def test_worker_entrypoint_class(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "entrypoint",
        """
        from workers import WorkerEntrypoint, Response

        class Default(WorkerEntrypoint):
            async def fetch(self, request):
                return Response(f"{request.method} {request.url} {self.env.WHO}")
        """,
        "vars:\n  WHO: class\n",
    )
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/path?q=1")
    assert response.status_code == 200
    assert response.text == f"GET {harness.url}/path?q=1 class"
    assert response.headers["content-type"] == "text/plain;charset=UTF-8"


def test_module_fetch_with_env_and_ctx(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "function",
        """
        from workers import Response, fetch as subrequest  # imported fetch is not the handler

        async def fetch(request, env, ctx):
            return Response.json({"who": env.WHO, "has_wait_until": hasattr(ctx, "wait_until")})
        """,
        "vars:\n  WHO: function\n",
    )
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/")
    assert response.json() == {"who": "function", "has_wait_until": True}
    assert response.headers["content-type"] == "application/json"


def test_legacy_on_fetch_with_js_response(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "legacy",
        """
        from js import Response, Headers
        from pyodide.ffi import to_js, create_proxy

        async def on_fetch(request, env):
            headers = Headers.new({"x-style": "legacy"})
            proxy = create_proxy(lambda: "ok")
            return Response.new(proxy() + " " + env.WHO, headers=headers, status=203)
        """,
        "vars:\n  WHO: legacy\n",
    )
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/")
    assert (response.status_code, response.text) == (203, "ok legacy")
    assert response.headers["x-style"] == "legacy"


def test_fetch_without_request_argument(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "noarg",
        """
        from workers import WorkerEntrypoint, Response

        class Default(WorkerEntrypoint):
            async def fetch(self):
                return Response("no request needed")
        """,
    )
    with harness.client(harness.deploy(root)) as client:
        assert client.get("/").text == "no request needed"


REQUEST_API = """
import json
from workers import WorkerEntrypoint, Response

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kind = request.headers.get("x-read")
        if kind == "text":
            text = await request.text()
            return Response(f"{len(text)}:{text[:5]}")
        if kind == "json":
            data = await request.json()
            return Response.json({"name": data.name, "n": data["n"] + 1})
        if kind == "stream":
            total, chunks = 0, 0
            async for chunk in request.body:
                total += len(chunk)
                chunks += 1
            return Response(f"{total} bytes in {chunks} chunks")
        if kind == "bytes":
            data = await request.bytes()
            return Response(data, headers={"content-type": "application/octet-stream"})
        if kind == "redirect":
            return Response.redirect("https://example.com/next", 307)
        return Response(None, status=204)
"""


def test_request_body_and_response_kinds(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "api", REQUEST_API)
    with harness.client(harness.deploy(root)) as client:
        assert (
            client.post("/", content="hello world", headers={"x-read": "text"}).text == "11:hello"
        )
        assert client.post(
            "/", json={"name": "ember", "n": 41}, headers={"x-read": "json"}
        ).json() == {
            "name": "ember",
            "n": 42,
        }
        big = b"x" * (3 * 1024 * 1024 + 17)
        streamed = client.post("/", content=big, headers={"x-read": "stream"}).text
        total, _, rest = streamed.partition(" bytes in ")
        assert int(total) == len(big) and int(rest.split()[0]) > 1
        payload = bytes(range(256)) * 1000
        echoed = client.post("/", content=payload, headers={"x-read": "bytes"})
        assert echoed.content == payload
        redirect = client.get("/", headers={"x-read": "redirect"})
        assert (redirect.status_code, redirect.headers["location"]) == (
            307,
            "https://example.com/next",
        )
        assert client.get("/").status_code == 204


def test_async_iterator_body_streams_as_produced(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "sse",
        """
        import asyncio
        from workers import WorkerEntrypoint, Response

        class Default(WorkerEntrypoint):
            async def fetch(self, request):
                async def events():
                    for i in range(3):
                        yield f"data: {i}\\n\\n"
                        await asyncio.sleep(0.3)
                return Response(events(), headers={"content-type": "text/event-stream"})
        """,
    )
    with harness.client(harness.deploy(root)) as client, client.stream("GET", "/") as response:
        chunks = response.iter_text()
        first = next(chunks)
        assert first == "data: 0\n\n"  # arrived while the handler was still sleeping
        rest = "".join(chunks)
    assert rest == "data: 1\n\ndata: 2\n\n"


def test_wait_until_finishes_after_the_response(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "waituntil",
        """
        import asyncio
        from workers import WorkerEntrypoint, Response, wait_until

        class Default(WorkerEntrypoint):
            async def fetch(self, request):
                async def later(tag):
                    await asyncio.sleep(0.2)
                    print("background done", tag)
                self.ctx.wait_until(later("ctx"))
                wait_until(later("module"))
                return Response("sent first")
        """,
    )
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        assert client.get("/").text == "sent first"
    assert "background done ctx" not in harness.console(deployment_id)  # the response did not wait
    harness.wait_for(
        lambda: (
            {"background done module", "background done ctx"} <= set(harness.console(deployment_id))
        )
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("return 'a string'", "fetch() returned str, expected a Response"),
        ("return None", "fetch() returned NoneType, expected a Response"),
        ("return {'a': 1}", "fetch() returned dict, expected a Response"),
    ],
)
def test_non_response_is_a_clear_500(
    harness: Harness, tmp_path: Path, body: str, expected: str
) -> None:
    """Named as workerd names it (a TypeError: the handler did not resolve to a Response),
    with the type returned; never ember's private exception class."""
    root = write_project(tmp_path / "bad", f"async def fetch(request, env, ctx):\n    {body}\n")
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/")
    assert response.status_code == 500
    assert expected in response.text
    assert "TypeError: Incorrect type for Promise: the Promise did not resolve to 'Response'" in (
        response.text
    )
    assert "_InvalidResponse" not in response.text
    if "dict" in expected:
        assert "Response.json(" in response.text


def test_an_import_error_from_workers_names_no_host_path(harness: Harness, tmp_path: Path) -> None:
    """Python puts a module's file in "cannot import name X from M (FILE)": for ember's
    ``workers`` that was the platform's install path, shown to the worker's author."""
    import ember

    root = write_project(tmp_path / "imports", "from workers import Nope\n")
    with harness.client(harness.deploy(root)) as client:
        text = client.get("/", headers={"accept": "text/plain"}).text
    assert "cannot import name 'Nope' from 'workers'" in text, text
    assert str(Path(ember.__file__).resolve().parent) not in text, text


def test_exception_page_shows_user_file_and_line(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "raises",
        """
        from workers import Response

        def helper():
            raise ValueError("broken on purpose")

        async def fetch(request, env, ctx):
            return helper()
        """,
    )
    with harness.client(harness.deploy(root)) as client:
        text = client.get("/").text
        html = client.get("/", headers={"accept": "text/html"}).text
        again = client.get("/")  # the isolate survives a handler exception
    assert "ValueError: broken on purpose" in text
    assert f'File "{root / "worker.py"}", line 5, in helper' in text
    assert "ember/runtime" not in text  # our frames are hidden
    assert "<b>5</b>" in html and "broken on purpose" in html
    assert again.status_code == 500


def test_env_repr_masks_secrets_and_binding_outside_request_fails(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(
        tmp_path / "secrets",
        """
        import os
        from workers import WorkerEntrypoint, Response, env

        try:
            env.SLOW.echo(1).send(None)  # start the call synchronously at import time
            GLOBAL = "no error"
        except Exception as exc:
            GLOBAL = str(exc)

        class Default(WorkerEntrypoint):
            async def fetch(self, request):
                print("secret is", self.env.TOKEN)
                body = repr(self.env) + "|" + repr(self.env.TOKEN) + "|" + GLOBAL[:60]
                body += "|" + str(os.environ.get("PLAIN")) + "|" + str(os.environ.get("TOKEN"))
                return Response(body)
        """,
        "vars:\n  PLAIN: visible\nslow:\n  binding: SLOW\n",
    )
    (root / ".dev.vars").write_text('TOKEN="s3cr3t-value"\n')
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        text = client.get("/").text
    assert "s3cr3t-value" not in text.split("|")[0]
    assert "TOKEN=<secret>" in text and "Secret('********')" in text
    assert "Disallowed operation called within global scope" in text
    assert text.endswith("|visible|None")
    assert "secret is [REDACTED]" in harness.console(deployment_id)


def test_ai_binding_without_model_service_fails_clearly() -> None:
    # The placeholder serves builds without ember.bindings.ai (which now registers the real AI
    # binding, tested end to end in tests/bindings/ai): its client raises, naming the binding.
    import asyncio

    from ember.bindings.base import BindingSpec
    from ember.bindings.unavailable import AI_BINDING_TYPE, CLIENT, UnavailableBinding
    from ember.config import ConfigSection
    from ember.errors import BindingError

    (spec,) = AI_BINDING_TYPE.parse(ConfigSection("ember.yaml", "ai", {"binding": "AI"}))
    assert spec == BindingSpec("ai", "AI", CLIENT, spec.options)
    client = UnavailableBinding(spec, channel=None)  # type: ignore[arg-type]
    with pytest.raises(BindingError) as caught:
        asyncio.run(client.run("@cf/zai-org/glm-4.7-flash", {"prompt": "hi"}))
    assert str(caught.value).startswith("env.AI: the AI binding is not configured")


def test_isolate_process_hygiene(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "hygiene",
        """
        import os, resource
        from workers import Response

        async def fetch(request, env, ctx):
            fds = []
            for fd in os.listdir("/proc/self/fd"):
                if int(fd) > 2:  # past stdio
                    try:
                        fds.append(os.readlink(f"/proc/self/fd/{fd}"))
                    except OSError:
                        pass  # listdir's own fd, closed by now
            facts = {
                "own_session": os.getsid(0) == os.getpid(),
                "fds": sorted(fds),
                "env": sorted(os.environ),
                "core": resource.getrlimit(resource.RLIMIT_CORE)[1],
                "data_limited": resource.getrlimit(resource.RLIMIT_DATA)[1] > 0,
            }
            return Response.json(facts)
        """,
        "vars:\n  VISIBLE: yes\n",
    )
    (root / ".dev.vars").write_text("HIDDEN=secret-value\n")
    with harness.client(harness.deploy(root)) as client:
        facts = client.get("/").json()
    assert facts["own_session"] is True
    # Past stdio nothing of the supervisor's leaks in: the isolate socket (and the dup its
    # writer watches) and the event loop's own fds (asyncio: epoll and a self-pipe socketpair;
    # uvloop adds libuv's eventfd, io_uring where the kernel allows it, two pipes, and
    # /dev/null held in reserve for EMFILE).
    kinds = [re.sub(r":\[\d+\]$", "", target) for target in facts["fds"]]
    # The isolate socket and its dup (socket_writer's watcher), the self-pipe pair.
    assert kinds.count("socket") == 4, facts["fds"]
    assert kinds.count("pipe") in (0, 4), facts["fds"]  # asyncio none; libuv's signal, async
    loop_internal = {"anon_inode:[eventpoll]", "anon_inode:[eventfd]", "anon_inode:[io_uring]"}
    assert set(kinds) <= {"socket", "pipe", "/dev/null", *loop_internal}, facts["fds"]
    assert kinds.count("/dev/null") <= 1, facts["fds"]
    assert kinds.count("anon_inode:[eventpoll]") == 1, facts["fds"]
    assert facts["env"] == ["LANG", "PATH", "PYTHONIOENCODING", "VISIBLE"]
    assert facts["core"] == 0 and facts["data_limited"] is True


def test_test_scheduled_paths_answer_as_wrangler_and_miniflare(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(
        tmp_path / "cronpaths",
        """
        from workers import WorkerEntrypoint

        class Default(WorkerEntrypoint):
            async def scheduled(self, controller, env, ctx):
                print(f"cron={controller.cron!r} time={controller.scheduledTime}")
                if controller.cron == "fail":
                    raise ValueError("cron failed")
        """,
    )
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        wrangler = client.get("/__scheduled")
        local = client.get("/cdn-cgi/local/scheduled", params={"cron": "0 * * * *", "time": "5"})
        failed = client.get("/cdn-cgi/local/scheduled", params={"cron": "fail", "format": "json"})
    assert (wrangler.status_code, wrangler.text) == (200, "Ran scheduled event\n")
    assert (local.status_code, local.text) == (200, "ok")
    assert failed.status_code == 500
    assert failed.json() == {"outcome": "exception", "noRetry": False}
    console = harness.console(deployment_id)
    assert "cron='' time=" in console[0]  # no ?cron=: empty, as wrangler's middleware passes
    assert "cron='0 * * * *' time=5" in console
