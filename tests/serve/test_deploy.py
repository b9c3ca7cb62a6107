"""Deploying to ``ember serve`` over its API and reaching the worker on the same port."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import pytest

from ember.runtime.deployments.multipart import Part
from tests.serve.conftest import (
    ServeProcess,
    answer,
    deploy_versions,
    permanent_account,
    put_worker,
    redeploy,
)


def test_first_deploy_is_reachable_by_host_path_and_workers_dev(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "acme")
    with serve.api(token) as api:
        namespace = api.post(
            f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "acme-kv"}
        ).json()["result"]["id"]
        put = put_worker(
            api,
            account_id,
            "hello",
            answer("v1"),
            bindings=[
                {"name": "GREETING", "type": "plain_text", "text": "hi"},
                {"name": "KV", "type": "kv_namespace", "namespace_id": namespace},
                {"name": "TOKEN", "type": "secret_text", "text": "s3cr3t-value"},
            ],
        )
        assert put.status_code == 200, put.text
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        assert api.put(f"{values}/k", content=b"from-rest").json()["success"]
        worker_url = api.get(f"/accounts/{account_id}/workers/workers/hello").json()["result"]
    expected = "v1 var=hi kv=from-rest secret=True"
    assert serve.worker("acme", "hello").text == expected
    assert httpx_get(f"{serve.url}/w/acme/hello/some/path?q=1") == expected
    reply = serve.worker("acme", "hello", headers={"host": "hello.acme.workers.dev"})
    assert reply.text == expected
    # wrangler prints the hostname of this URL; sent as Host to the platform's port, it works.
    hostname = worker_url["subdomain"]["url"].split("//")[1].split(":")[0]
    assert hostname == "hello.acme.localhost"
    assert serve.worker("acme", "nope").status_code == 404
    assert serve.worker("other", "hello").status_code == 404
    assert "live: hello (account acme) v1" in serve.output()
    assert "http://hello.acme.localhost:" in serve.output()


def httpx_get(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=30).text


def test_redeploy_rollback_gradual_and_delete(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "roll")
    with serve.api(token) as api:
        first = put_worker(api, account_id, "app", answer("one"))
        v1 = first.json()["result"]["deployment_id"]
        assert serve.worker("roll", "app").text.startswith("one ")
        second = redeploy(api, account_id, "app", answer("two"))
        assert second.status_code == 200, second.text
        assert serve.worker("roll", "app").text.startswith("two ")
        v2 = second.json()["result"]["versions"][0]["version_id"]

        back = deploy_versions(api, account_id, "app", [(v1, 100)])
        assert back.json()["result"]["annotations"]["workers/triggered_by"] == "rollback"
        assert serve.worker("roll", "app").text.startswith("one ")

        split = deploy_versions(api, account_id, "app", [(v1, 50), (v2, 50)])
        assert split.status_code == 200, split.text
        seen = collections.Counter(serve.worker("roll", "app").text.split()[0] for _ in range(40))
        assert set(seen) == {"one", "two"}, seen

        assert api.delete(f"/accounts/{account_id}/workers/services/app").status_code == 200
    gone = serve.worker("roll", "app")
    assert gone.status_code == 404 and "No worker named 'app'" in gone.text
    versions_dir = serve.state_dir / "accounts" / account_id / "versions"
    assert list(versions_dir.iterdir()) == []  # the deleted worker's files are gone too


def test_a_version_that_does_not_load_is_refused_and_the_live_one_stays(
    serve: ServeProcess,
) -> None:
    account_id, token = permanent_account(serve, "careful")
    broken = "from workers import Response\ndef on_fetch(request:\n"
    raising = "raise RuntimeError('no config for ' + 'prod')\n"
    with serve.api(token) as api:
        refused_first = put_worker(api, account_id, "svc", broken)
        assert refused_first.status_code == 400
        error = refused_first.json()["errors"][0]
        assert error["code"] == 10021 and "failed to start" in error["message"]
        assert "SyntaxError" in error["message"]
        # Nothing of the refused first deploy remains: the worker does not exist.
        assert api.get(f"/accounts/{account_id}/workers/services/svc").status_code == 404

        assert put_worker(api, account_id, "svc", answer("good")).status_code == 200
        versions = api.get(f"/accounts/{account_id}/workers/scripts/svc/versions").json()
        for bad in (broken, raising):
            for attempt in (put_worker, redeploy):
                reply = attempt(api, account_id, "svc", bad)
                assert reply.status_code == 400, reply.text
                assert reply.json()["errors"][0]["code"] == 10021
                assert serve.worker("careful", "svc").text.startswith("good ")
        assert "no config for prod" in reply.json()["errors"][0]["message"]
        after = api.get(f"/accounts/{account_id}/workers/scripts/svc/versions").json()
        assert after["result"]["items"] == versions["result"]["items"]  # refused: not stored
        written = serve.state_dir / "accounts" / account_id / "versions"
        assert [d.name for d in written.iterdir()] == [versions["result"]["items"][0]["id"]]


def test_python_modules_and_secret_changes_reach_the_worker(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "vendor")
    source = (
        "from workers import Response\nimport vendored\nfrom helper import WORD\n"
        "async def on_fetch(request, env):\n"
        "    return Response(f'{vendored.NAME} {WORD} {getattr(env, \"TOKEN\", None)}')\n"
    )
    extra = [
        Part("helper.py", "helper.py", "text/x-python", b"WORD = 'helped'\n"),
        Part(
            "python_modules/vendored/__init__.py",
            "python_modules/vendored/__init__.py",
            "application/octet-stream",  # as wrangler sends vendored packages
            b"NAME = 'vendored'\n",
        ),
    ]
    with serve.api(token) as api:
        assert put_worker(api, account_id, "mods", source, extra=extra).status_code == 200
        assert serve.worker("vendor", "mods").text == "vendored helped None"
        put = api.put(
            f"/accounts/{account_id}/workers/scripts/mods/secrets",
            json={"name": "TOKEN", "text": "tok-123", "type": "secret_text"},
        )
        assert put.status_code == 200
        assert serve.worker("vendor", "mods").text == "vendored helped tok-123"
        api.delete(f"/accounts/{account_id}/workers/scripts/mods/secrets/TOKEN")
        assert serve.worker("vendor", "mods").text == "vendored helped None"


def test_a_vendored_compiled_extension_is_refused_with_what_to_do(serve: ServeProcess) -> None:
    """A package with compiled code vendored into python_modules/ (as the missing-module hint
    suggests for pure-Python ones) cannot be loaded from a deployed worker's files (mounted
    without exec rights; on Cloudflare, Pyodide loads no Linux builds either): the refusal must
    say so and what to do, not only the loader's 'failed to map segment'."""
    found = importlib.util.find_spec("xxlimited")  # CPython's example extension module
    if found is None or not found.origin or not found.origin.endswith(".so"):
        pytest.skip("this Python has no xxlimited extension module to vendor")
    account_id, token = permanent_account(serve, "native")
    source = "import xxlimited\nasync def on_fetch(request, env):\n    return 'x'\n"
    name = "python_modules/" + Path(found.origin).name
    extra = [Part(name, name, "application/octet-stream", Path(found.origin).read_bytes())]
    with serve.api(token) as api:
        reply = put_worker(api, account_id, "ext", source, extra=extra)
    if reply.status_code == 200:
        pytest.skip("this host runs workers without a mount namespace: the extension loads")
    message = reply.json()["errors"][0]["message"]
    assert reply.json()["errors"][0]["code"] == 10021
    assert f"/app/{name}" in message and "compiled extension" in message, message
    assert "Install the package into the Python environment ember serve" in message, message


def test_wrangler_placeholder_answers_clearly_then_python_replaces_it(
    serve: ServeProcess,
) -> None:
    account_id, token = permanent_account(serve, "draft")
    with serve.api(token) as api:
        body, headers = _placeholder()
        assert (
            api.put(
                f"/accounts/{account_id}/workers/scripts/pending", content=body, headers=headers
            ).status_code
            == 200
        )
        reply = serve.worker("draft", "pending")
        assert reply.status_code == 501 and "ember runs Python Workers only" in reply.text
        assert redeploy(api, account_id, "pending", answer("python")).status_code == 200
    assert serve.worker("draft", "pending").text.startswith("python ")


def _placeholder() -> tuple[bytes, dict[str, str]]:
    """What ``wrangler secret put`` uploads for a worker that does not exist yet."""
    import json

    from ember.runtime.deployments.multipart import build_multipart

    meta = {"main_module": "pending", "bindings": [], "logpush": False}
    parts = [
        Part("metadata", None, None, json.dumps(meta).encode()),
        Part("pending", "pending", "application/javascript+module", b"export default {fetch(){}}"),
    ]
    boundary = "----formdata-undici-1"
    return build_multipart(parts, boundary), {
        "content-type": f"multipart/form-data; boundary={boundary}"
    }
