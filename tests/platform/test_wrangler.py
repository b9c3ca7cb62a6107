"""The real wrangler 4.164 against ``ember serve``, inside a loopback-only network namespace.

Every wrangler process runs in a network namespace that holds only ``lo`` (see netns.py), with
CI=1, metrics off and a throwaway HOME, and talks to the platform through nothing but
CLOUDFLARE_API_BASE_URL. Each scenario ends with real HTTP requests to the deployed worker,
sent to the platform's port with the hostname wrangler printed as the Host header.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.platform.netns import unavailable_reason, wrangler_argv, wrangler_env
from tests.platform.wrangler_scene import Scene, scene_in, version_id

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    yield from scene_in(tmp_path)


def test_temporary_deploy_kv_secret_tail_rollback_delete(scene: Scene) -> None:
    code, out = scene.wrangler("deploy", "--temporary")
    assert code == 0, out
    assert "Temporary account ready:" in out and "(created)" in out
    assert "Claim within: 60 minutes" in out
    claim = re.search(r"Claim URL: (\S+)", out).group(1)  # type: ignore[union-attr]
    assert claim.startswith(scene.origin + "/claim-preview?claimToken=")
    name = re.search(r"Account: (\S+) \(created\)", out).group(1)  # type: ignore[union-attr]
    hostname = f"hello-py.{name}.localhost"
    assert f"\n  {hostname}\n" in out  # the URL line wrangler prints: a hostname, no port
    assert 'Creating new KV Namespace "hello-py-kv"' in out
    assert "Worker Startup Time:" in out
    first = version_id(out)
    status, body = scene.request(hostname)
    assert status == 200 and body.startswith("v1 hello from vars kv=None secret=None ai="), body

    scene.write_entry("v2")
    code, out = scene.wrangler("deploy", "--temporary")
    assert code == 0, out
    assert "(reused)" in out and "env.KV (inherited)" in out
    second = version_id(out)
    assert scene.request(hostname)[1].startswith("v2 hello from vars kv=None")

    code, out = scene.wrangler("secret", "put", "MY_SECRET", "--temporary", stdin="s3cr3t-value")
    assert code == 0 and "Success! Uploaded secret MY_SECRET" in out, out
    code, out = scene.wrangler("kv", "key", "put", "--binding", "KV", "k1", "v1", "--remote",
                               "--temporary")  # fmt: skip
    assert code == 0, out
    code, out = scene.wrangler("kv", "key", "get", "--binding", "KV", "k1", "--remote",
                               "--temporary")  # fmt: skip
    assert code == 0 and out.startswith("v1Temporary account ready"), out  # stdout: v1
    assert scene.request(hostname)[1].startswith("v2 hello from vars kv=v1 secret=s3cr3t-value")

    plane = scene.plane()
    try:
        account = plane.accounts.find(name)
        assert account is not None and account.temporary
        assert plane.accounts.find_by_claim_token(claim.split("claimToken=")[1]) == account
        versions = plane.scripts.versions(account, "hello-py")
        assert [v.id for v in versions][1:] == [second, first]
        assert versions[0].secret_names == (("MY_SECRET", "secret_text"),)
        assert versions[0].source == "wrangler"
    finally:
        plane.close()

    event = _tail_one_request(scene, hostname)
    assert event["scriptName"] == "hello-py" and event["outcome"] == "ok"
    assert event["event"]["request"]["url"].endswith("/tail-probe")
    assert event["event"]["response"]["status"] == 200
    assert any("served" in " ".join(log["message"]) for log in event["logs"])

    code, out = scene.wrangler("deployments", "list", "--temporary")
    assert code == 0, out
    assert first in out and second in out and "Secret Change" in out

    code, out = scene.wrangler("rollback", first, "--message", "back to one", "--temporary")
    assert code == 0, out
    assert f"Worker Version {first} has been deployed to 100% of traffic" in out
    assert scene.request(hostname)[1].startswith("v1 hello from vars kv=v1 secret=None")
    code, out = scene.wrangler("deployments", "list", "--temporary")
    assert code == 0 and re.search(r"Source:\s+Rollback", out), out  # newest last
    assert re.findall(r"Source:\s+(\S+)", out)[-1] == "Rollback", out

    code, out = scene.wrangler("versions", "list", "--temporary")
    assert code == 0 and first in out, out

    code, out = scene.wrangler("delete", "--temporary")
    assert code == 0 and "Successfully deleted hello-py" in out, out
    status, body = scene.request(hostname)
    assert status == 404 and "No worker named 'hello-py'" in body


def _tail_one_request(scene: Scene, hostname: str) -> dict[str, object]:
    """Run ``wrangler tail --format json``, send requests until one arrives, stop it (Ctrl-C)."""
    tail = scene.ns.popen(
        wrangler_argv("tail", "--format", "json", "--temporary"),
        wrangler_env(scene.home, scene.api),
        scene.project,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(iter(tail.stdout.readline, "")))
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while "/tail-probe" not in "".join(output):
            assert time.monotonic() < deadline and tail.poll() is None, "".join(output)
            scene.request(hostname, "/tail-probe")
            time.sleep(1.0)
        time.sleep(0.5)  # let the whole pretty-printed object arrive
    finally:
        tail.send_signal(signal.SIGINT)
        tail.wait(30)
        reader.join(10)
    text = "".join(output)
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"^\{", text, re.M)]:
        event, _ = decoder.raw_decode(text[start:])
        if "/tail-probe" in json.dumps(event):
            return event
    raise AssertionError(text)


def test_token_whoami_placeholder_then_python_deploy(scene: Scene) -> None:
    plane = scene.plane()
    account, issued = plane.accounts.create_permanent("acme")
    plane.close()
    token = {"CLOUDFLARE_API_TOKEN": issued.token}

    code, out = scene.wrangler("whoami", **token)
    assert code == 0 and "acme" in out and account.id in out, out

    code, out = scene.wrangler("secret", "put", "MY_SECRET", stdin="s3cr3t-value", **token)
    assert code == 0, out
    assert 'Creating new Worker "hello-py"' in out and "Success!" in out
    status, body = scene.request("hello-py.acme.localhost")
    assert status == 501 and "ember runs Python Workers only" in body

    # The config's limits go up with the version (wrangler's metadata.limits) and stay its own.
    toml = scene.project / "wrangler.toml"
    toml.write_text(toml.read_text() + "\n[limits]\ncpu_ms = 50\n")
    code, out = scene.wrangler("deploy", **token)
    assert code == 0, out
    version = version_id(out)
    assert "\n  hello-py.acme.localhost\n" in out
    assert scene.request("hello-py.acme.localhost")[1].startswith(
        "v1 hello from vars kv=None secret=s3cr3t-value"
    )
    # The workers.dev-style name reaches the same worker.
    assert scene.request("hello-py.acme.workers.dev")[1].startswith("v1 hello from vars")
    plane = scene.plane()
    try:
        deployed = plane.scripts.version(account, "hello-py", version)
        assert deployed.main_module == "entry.py"
        assert deployed.secret_names == (("MY_SECRET", "secret_text"),)
        assert deployed.metadata["limits"] == {"cpu_ms": 50}
    finally:
        plane.close()
    # Past the tier's maximum (5 minutes, as Workers Paid): refused, in Cloudflare's words.
    toml.write_text(toml.read_text().replace("cpu_ms = 50", "cpu_ms = 300001"))
    code, out = scene.wrangler("deploy", **token)
    assert code != 0 and "[code: 100328]" in out and "limits.cpu_ms" in out, out
    toml.write_text(toml.read_text().replace("cpu_ms = 300001", "cpu_ms = 50"))

    code, out = scene.wrangler("deploy", CLOUDFLARE_API_TOKEN="ember_wrong")
    assert code != 0 and "[code: 10000]" in out, out
    (scene.project / "src" / "entry.py").write_text("def broken(:\n")
    code, out = scene.wrangler("deploy", **token)
    assert code != 0 and "[code: 10021]" in out and "SyntaxError" in out, out
    assert scene.request("hello-py.acme.localhost")[1].startswith("v1 hello from vars")


def test_wranglers_secret_bulk_and_kv_bulk_remote(scene: Scene) -> None:
    plane = scene.plane()
    _, issued = plane.accounts.create_permanent("bulky")
    plane.close()
    token = {"CLOUDFLARE_API_TOKEN": issued.token}
    code, out = scene.wrangler("deploy", **token)
    assert code == 0, out

    (scene.project / "secrets.json").write_text(json.dumps({"MY_SECRET": "bulk-s", "OTHER": "o"}))
    code, out = scene.wrangler("secret", "bulk", "secrets.json", **token)
    assert code == 0 and "✨ 2 secrets successfully created" in out, out

    items = [{"key": "k1", "value": "from-bulk"}, {"key": "k2", "value": "Yg==", "base64": True}]
    (scene.project / "put.json").write_text(json.dumps(items))
    code, out = scene.wrangler("kv", "bulk", "put", "put.json", "--binding", "KV", "--remote",
                               **token)  # fmt: skip
    assert code == 0 and "Success!" in out, out
    assert scene.request("hello-py.bulky.localhost")[1].startswith(
        "v1 hello from vars kv=from-bulk secret=bulk-s"
    )
    (scene.project / "keys.json").write_text(json.dumps(["k1", "k2"]))
    code, out = scene.wrangler("kv", "bulk", "get", "keys.json", "--binding", "KV", "--remote",
                               **token)  # fmt: skip
    assert code == 0 and '"k2": "b"' in out, out
    code, out = scene.wrangler("kv", "bulk", "delete", "keys.json", "--binding", "KV", "--remote",
                               "--force", **token)  # fmt: skip
    assert code == 0 and "Success!" in out, out
    assert "kv=None" in scene.request("hello-py.bulky.localhost")[1]
