"""The real wrangler 4.164 against ember's control plane, inside a loopback-only namespace.

Every wrangler process runs in a network namespace that holds only ``lo`` (see netns.py), with
CI=1, metrics off and a throwaway HOME, and talks to the platform through nothing but
CLOUDFLARE_API_BASE_URL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ember.runtime.deployments.plane import ControlPlane
from tests.platform.netns import LoopbackNamespace, unavailable_reason, wrangler_argv, wrangler_env

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]

WRANGLER_TOML = """\
name = "hello-py"
main = "src/entry.py"
compatibility_date = "2026-11-01"
compatibility_flags = ["python_workers"]

[vars]
GREETING = "hello from vars"

[[kv_namespaces]]
binding = "KV"

[ai]
binding = "AI"
"""
ENTRY = """\
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response(self.env.GREETING)
"""


@dataclass
class Scene:
    ns: LoopbackNamespace
    state: Path
    project: Path
    home: Path
    api: str
    origin: str

    def wrangler(self, *args: str, stdin: str | None = None, **env: str) -> tuple[int, str]:
        result = self.ns.run(
            wrangler_argv(*args),
            wrangler_env(self.home, self.api, **env),
            self.project,
            stdin=stdin,
        )
        return result.returncode, result.stdout + result.stderr

    def plane(self) -> ControlPlane:
        return ControlPlane(self.state)


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "wrangler.toml").write_text(WRANGLER_TOML)
    (project / "src" / "entry.py").write_text(ENTRY)
    (tmp_path / "home").mkdir()
    config = tmp_path / "ember.yaml"
    config.write_text("platform:\n  proof_of_work: {k: 200, g: 500, sample: 8}\n")
    ns = LoopbackNamespace()
    try:
        port = ns.start_platform(tmp_path / "state", config)
        origin = f"http://127.0.0.1:{port}"
        yield Scene(
            ns, tmp_path / "state", project, tmp_path / "home", origin + "/client/v4", origin
        )
    finally:
        ns.close()


def _version_id(output: str) -> str:
    match = re.search(r"Current Version ID: ([0-9a-f-]{36})", output)
    assert match, output
    return match.group(1)


def test_temporary_deploy_redeploy_secret_deployments_rollback_delete(scene: Scene) -> None:
    code, out = scene.wrangler("deploy", "--temporary")
    assert code == 0, out
    assert "Temporary account ready:" in out and "(created)" in out
    assert "Claim within: 60 minutes" in out
    claim = re.search(r"Claim URL: (\S+)", out).group(1)
    assert claim.startswith(scene.origin + "/claim-preview?claimToken=")
    name = re.search(r"Account: (\S+) \(created\)", out).group(1)
    assert f"hello-py.{name}.localhost" in out
    assert 'Creating new KV Namespace "hello-py-kv"' in out
    first = _version_id(out)

    code, out = scene.wrangler("deploy", "--temporary")
    assert code == 0, out
    assert "(reused)" in out and "env.KV (inherited)" in out
    second = _version_id(out)

    code, out = scene.wrangler("secret", "put", "MY_SECRET", "--temporary", stdin="s3cr3t-value")
    assert code == 0 and "Success! Uploaded secret MY_SECRET" in out, out

    plane = scene.plane()
    try:
        account = plane.accounts.find(name)
        assert account is not None and account.temporary
        assert plane.accounts.find_by_claim_token(claim.split("claimToken=")[1]) == account
        versions = plane.scripts.versions(account, "hello-py")
        assert [v.id for v in versions][1:] == [second, first]
        by_id = {v.id: v for v in versions}
        kv = [b for b in by_id[second].bindings if b.name == "KV"]
        assert kv == [b for b in by_id[first].bindings if b.name == "KV"]
        assert versions[0].secret_names == (("MY_SECRET", "secret_text"),)
        assert by_id[first].source == "wrangler"
    finally:
        plane.close()

    code, out = scene.wrangler("deployments", "list", "--temporary")
    assert code == 0, out
    assert first in out and second in out and "Secret Change" in out

    code, out = scene.wrangler("rollback", first, "--message", "back to one", "--temporary")
    assert code == 0, out
    assert f"Worker Version {first} has been deployed to 100% of traffic" in out

    code, out = scene.wrangler("versions", "list", "--temporary")
    assert code == 0 and first in out, out

    code, out = scene.wrangler("delete", "--temporary")
    assert code == 0 and "Successfully deleted hello-py" in out, out
    plane = scene.plane()
    try:
        assert plane.scripts.list(plane.accounts.find(name)) == []
    finally:
        plane.close()


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

    code, out = scene.wrangler("deploy", **token)
    assert code == 0, out
    version = _version_id(out)
    assert "hello-py.acme.localhost" in out
    plane = scene.plane()
    try:
        deployed = plane.scripts.version(account, "hello-py", version)
        assert deployed.main_module == "entry.py"
        assert deployed.secret_names == (("MY_SECRET", "secret_text"),)
        live = plane.scripts.live(account, "hello-py")
        assert live.versions[0].version_id == version
    finally:
        plane.close()

    code, out = scene.wrangler("deploy", CLOUDFLARE_API_TOKEN="ember_wrong")
    assert code != 0 and "[code: 10000]" in out, out
