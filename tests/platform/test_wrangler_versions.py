"""The real wrangler 4.164's versions, gradual deployments and CI deploy flags against
``ember serve`` (the scene: ``wrangler_scene.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.deployments.records import Version
from tests.platform.netns import unavailable_reason
from tests.platform.wrangler_scene import Scene, scene_in, version_id

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    yield from scene_in(tmp_path)


def test_wranglers_versions_upload_and_gradual_deploy(scene: Scene) -> None:
    # No KV binding: `versions upload` does not provision resources (wrangler's default).
    (scene.project / "wrangler.toml").write_text(
        'name = "canary"\nmain = "src/entry.py"\ncompatibility_date = "2026-11-01"\n'
        'compatibility_flags = ["python_workers"]\n'
    )
    entry = "from workers import Response\n\nasync def on_fetch(request, env):\n"
    (scene.project / "src" / "entry.py").write_text(entry + '    return Response("one")\n')
    code, out = scene.wrangler("deploy", "--temporary")
    assert code == 0, out
    first = version_id(out)
    name = re.search(r"Account: (\S+) \(created\)", out).group(1)  # type: ignore[union-attr]
    hostname = f"canary.{name}.localhost"

    (scene.project / "src" / "entry.py").write_text(entry + '    return Response("two")\n')
    code, out = scene.wrangler(
        "versions", "upload", "--message", "try two", "--tag", "t2", "--temporary"
    )
    assert code == 0, out
    found = re.search(r"Worker Version ID: ([0-9a-f-]{36})", out)
    assert found, out
    second = found.group(1)
    assert scene.request(hostname)[1] == "one"  # uploaded, not deployed

    code, out = scene.wrangler(
        "versions", "deploy", f"{first}@30%", f"{second}@70%", "--yes", "--temporary"
    )
    assert code == 0, out
    assert f"Deployed canary version {first} at 30% and version {second} at 70%" in out
    # Both answer: missing one of them in 60 requests has a chance below 1e-9.
    assert {scene.request(hostname)[1] for _ in range(60)} == {"one", "two"}

    code, out = scene.wrangler("deployments", "status", "--temporary")
    assert code == 0 and f"(30%) {first}" in out and f"(70%) {second}" in out, out
    code, out = scene.wrangler("versions", "view", second, "--temporary")
    assert code == 0 and "t2" in out and "try two" in out, out
    code, out = scene.wrangler("versions", "list", "--json", "--temporary")
    assert code == 0, out
    listed, _ = json.JSONDecoder().raw_decode(out[out.index("[") :])  # then stderr's notes
    assert [v["id"] for v in listed] == [first, second]

    # A version at 0% (Cloudflare's smoke test) gets no traffic but stays in the deployment.
    code, out = scene.wrangler(
        "versions", "deploy", f"{first}@100%", f"{second}@0%", "--yes", "--temporary"
    )
    assert code == 0, out
    assert {scene.request(hostname)[1] for _ in range(20)} == {"one"}


def test_wranglers_ci_deploy_flags(scene: Scene) -> None:
    """wrangler deploy's --dry-run, --var, --secrets-file, --tag, --compatibility-date and
    --keep-vars: what it sends, the platform keeps and the worker sees."""
    plane = scene.plane()
    account, issued = plane.accounts.create_permanent("ciflags")
    plane.close()
    token = {"CLOUDFLARE_API_TOKEN": issued.token}
    (scene.project / "secrets.json").write_text(json.dumps({"MY_SECRET": "from-file"}))

    code, out = scene.wrangler("deploy", "--dry-run", "--var", "GREETING:dry", **token)
    assert code == 0 and "--dry-run: exiting now." in out, out
    plane = scene.plane()
    try:
        assert plane.scripts.list(account) == []
    finally:
        plane.close()

    code, out = scene.wrangler(
        "deploy", "--var", "GREETING:from-cli", "--var", "EXTRA:x:y", "--secrets-file",
        "secrets.json", "--tag", "ci-1", "--compatibility-date", "2026-10-01", **token,
    )  # fmt: skip
    assert code == 0, out
    assert 'env.MY_SECRET ("(hidden)")' in out and 'env.EXTRA ("(hidden)")' in out
    assert scene.request("hello-py.ciflags.localhost")[1].startswith(
        "v1 from-cli kv=None secret=from-file"
    )

    def live() -> tuple[dict[str, dict[str, object]], Version]:
        plane = scene.plane()
        try:
            deployment = plane.scripts.live(account, "hello-py")
            assert deployment is not None
            version = plane.scripts.version(account, "hello-py", deployment.versions[0].version_id)
        finally:
            plane.close()
        return {b.name: b.config for b in version.bindings}, version

    bindings, version = live()
    assert bindings["EXTRA"] == {"text": "x:y"}
    assert version.compatibility_date == "2026-10-01"
    assert version.annotations["workers/tag"] == "ci-1"

    # --keep-vars sends keep_bindings with plain_text/json: EXTRA (not in the config) stays.
    code, out = scene.wrangler("deploy", "--keep-vars", **token)
    assert code == 0, out
    bindings, _ = live()
    assert bindings["EXTRA"] == {"text": "x:y"}
    assert bindings["GREETING"] == {"text": "hello from vars"}
    code, out = scene.wrangler("deploy", **token)
    assert code == 0, out
    assert "EXTRA" not in live()[0]
    # The file's secret was kept by every later deploy (keep_bindings: secret_text).
    assert "secret=from-file" in scene.request("hello-py.ciflags.localhost")[1]


def test_wranglers_history_and_rollback_past_the_kept_versions(tmp_path: Path) -> None:
    """wrangler's ``deployments list`` fetches each listed deployment's version: after pruning,
    it still works; a rollback to a pruned version is refused, saying why."""
    scene = scene_in(tmp_path, "  versions_kept_per_worker: 2\n")
    s = next(scene)
    try:
        ids = []
        for tag in ("v1", "v2", "v3"):
            s.write_entry(tag)
            code, out = s.wrangler("deploy", "--temporary")
            assert code == 0, out
            ids.append(version_id(out))
        code, out = s.wrangler("deployments", "list", "--temporary")
        assert code == 0 and ids[1] in out and ids[2] in out and ids[0] not in out, out
        code, out = s.wrangler("versions", "list", "--temporary")
        assert code == 0 and ids[0] not in out and ids[1] in out, out

        code, out = s.wrangler("rollback", ids[0], "--temporary")
        assert code != 0, out
        assert ids[0] in out and "keeps its 2 most recent versions" in out, out
        code, out = s.wrangler("rollback", "--message", "back", "--temporary")
        assert code == 0 and f"Worker Version {ids[1]} has been deployed" in out, out
    finally:
        scene.close()
