"""A real ``ember serve`` (the CLI, as a subprocess) on an ephemeral loopback port.

``ServeProcess`` starts it with a state directory and a small proof of work, waits for the port
file, and can be killed (``kill -9``) and restarted on the same state. Helpers deploy workers
over the API exactly as wrangler does (multipart PUT, then versions + deployments) and send
requests to a worker by Host name or by path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ember.runtime.deployments.multipart import Part, build_multipart
from ember.runtime.deployments.plane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
BASE_CONFIG = """\
platform:
  max_script_size: 1MiB
  proof_of_work: {k: 64, g: 64, sample: 8}
"""


TINY_GLM = ROOT / "ember" / "models" / "checkpoints" / "glm4moe-tiny"


def tiny_ai_config(model: str, limits: str = "") -> str:
    """``BASE_CONFIG`` plus an ``ai`` section serving ``model`` from the shipped tiny GLM
    checkpoint on one thread (``limits``: an ``ai.limits`` flow mapping, e.g.
    ``{requests_per_minute: 2}``)."""
    section = f"  limits: {limits}\n" if limits else ""
    return (
        BASE_CONFIG
        + f"""\
ai:
{section}  models:
    "{model}":
      checkpoint: {TINY_GLM}
      args: ["--torch-threads", "1", "--kv-cache-bytes", "16MiB"]
"""
    )


class ServeProcess:
    """``python -m ember serve`` on 127.0.0.1:0."""

    def __init__(self, state_dir: Path, config: str = BASE_CONFIG, *extra: str) -> None:
        self.state_dir = state_dir
        self.config = state_dir.parent / f"{state_dir.name}.yaml"
        self.config.write_text(config)
        self.extra = extra
        # Words before the command (e.g. ``unshare`` and a shell that mounts something, then
        # ``exec``s it: the process is still ``proc``, its pid the platform's).
        self.prefix: tuple[str, ...] = ()
        self.log = state_dir.parent / f"{state_dir.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.start()

    def ember(self, token: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """``python -m ember ARGS`` in ``cwd`` against this platform with ``token``, no saved
        credentials and no other ``EMBER_*`` setting of the test's own environment."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
        env |= {
            "PYTHONPATH": str(ROOT),
            "EMBER_CREDENTIALS": str(cwd / "no-credentials.json"),
            "EMBER_PLATFORM": self.url,
            "EMBER_API_TOKEN": token,
        }
        return subprocess.run(
            [sys.executable, "-m", "ember", *args],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def start(self) -> None:
        port_file = self.state_dir.parent / f"{self.state_dir.name}.port"
        port_file.unlink(missing_ok=True)
        argv = [
            *self.prefix, sys.executable, "-m", "ember", "serve", "--port", "0", "--state-dir",
            str(self.state_dir), "--config", str(self.config), "--port-file", str(port_file),
            *self.extra,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ember serve did not start:\n{self.output()}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def api(self, token: str | None = None, **headers: str) -> httpx.Client:
        if token:
            headers["authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url + "/client/v4", headers=headers, timeout=60)

    def worker(self, account: str, name: str, path: str = "/", **kw: object) -> httpx.Response:
        """A request to a worker by its Host name."""
        headers = {"host": f"{name}.{account}.localhost", **kw.pop("headers", {})}  # type: ignore[dict-item]
        return httpx.request(
            str(kw.pop("method", "GET")), self.url + path, headers=headers, timeout=60, **kw
        )

    def plane(self) -> ControlPlane:
        """The platform's state, opened from this process (WAL: safe while it runs)."""
        return ControlPlane(self.state_dir)


def permanent_account(serve: ServeProcess, name: str) -> tuple[str, str]:
    """(account id, token) of a new permanent account."""
    plane = serve.plane()
    try:
        account, issued = plane.accounts.create_permanent(name)
    finally:
        plane.close()
    return account.id, issued.token


def upload(
    source: str,
    bindings: list[dict[str, object]] | None = None,
    main: str = "entry.py",
    extra: list[Part] | None = None,
    **metadata: object,
) -> tuple[bytes, dict[str, str]]:
    """A wrangler-shaped multipart body and its headers."""
    meta = {
        "main_module": main,
        "bindings": bindings or [],
        "compatibility_date": "2026-11-01",
        "compatibility_flags": ["python_workers"],
        "keep_bindings": ["secret_text", "secret_key"],
        **metadata,
    }
    parts = [
        Part("metadata", None, None, json.dumps(meta).encode()),
        Part(main, main, "text/x-python", source.encode()),
        *(extra or []),
    ]
    boundary = "----formdata-ember-serve-test"
    headers = {
        "content-type": f"multipart/form-data; boundary={boundary}",
        "user-agent": "wrangler/4.164.0",
    }
    return build_multipart(parts, boundary), headers


def put_worker(
    client: httpx.Client, account_id: str, name: str, source: str, **kw: object
) -> httpx.Response:
    body, headers = upload(source, **kw)  # type: ignore[arg-type]
    return client.put(
        f"/accounts/{account_id}/workers/scripts/{name}?bindings_inherit=strict",
        content=body,
        headers=headers,
    )


def redeploy(
    client: httpx.Client, account_id: str, name: str, source: str, **kw: object
) -> httpx.Response:
    """wrangler's redeploy: POST versions, then POST deployments (returns the second reply)."""
    body, headers = upload(source, **kw)  # type: ignore[arg-type]
    base = f"/accounts/{account_id}/workers/scripts/{name}"
    version = client.post(f"{base}/versions?bindings_inherit=strict", content=body, headers=headers)
    if version.status_code != 200:
        return version
    return deploy_versions(client, account_id, name, [(version.json()["result"]["id"], 100)])


def deploy_versions(
    client: httpx.Client, account_id: str, name: str, versions: list[tuple[str, float]]
) -> httpx.Response:
    return client.post(
        f"/accounts/{account_id}/workers/scripts/{name}/deployments",
        json={
            "strategy": "percentage",
            "versions": [{"version_id": v, "percentage": p} for v, p in versions],
            "annotations": {},
        },
    )


def answer(source_tag: str) -> str:
    """A worker whose answer names its version and shows its var, secret and KV binding."""
    return f'''\
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kv = getattr(self.env, "KV", None)
        stored = (await kv.get("k")) if kv is not None else None
        secret = getattr(self.env, "TOKEN", None)
        print("{source_tag} served", request.url)
        return Response(f"{source_tag} var={{getattr(self.env, 'GREETING', None)}} "
                        f"kv={{stored}} secret={{secret is not None}}")
'''


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One platform for a test module (tests use their own accounts)."""
    process = ServeProcess(tmp_path_factory.mktemp("serve") / "state")
    yield process
    process.stop()


def temporary_account(serve: ServeProcess) -> dict[str, object]:
    """What ``wrangler deploy --temporary`` does first: solve the challenge, get an account."""
    from ember.runtime.deployments import pow

    with serve.api() as client:
        challenge = client.post("/provisioning/previews/challenge", json={}).json()["result"]
        solved = pow.solve_challenge(
            pow.Challenge(
                challenge["challengeToken"], challenge["seed"], challenge["k"], challenge["g"], 0.0
            )
        )
        reply = client.post(
            "/provisioning/previews",
            json={
                "acceptTermsOfService": "yes",
                "challengeToken": challenge["challengeToken"],
                "solution": {"checkpoints": solved},
            },
        )
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]
