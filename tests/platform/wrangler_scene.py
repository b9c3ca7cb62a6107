"""The scene the real-wrangler tests play in: ``ember serve`` in a loopback-only network
namespace, a Python Workers project for wrangler to deploy, and a throwaway HOME (see
``test_wrangler.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ember.runtime.deployments.plane import ControlPlane
from tests.platform.netns import LoopbackNamespace, wrangler_argv, wrangler_env

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

TAG = "{tag}"


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        value = await self.env.KV.get("k1")
        secret = getattr(self.env, "MY_SECRET", None)
        print("served", request.url)
        return Response(
            f"{{TAG}} {{self.env.GREETING}} kv={{value}} secret={{secret}} "
            f"ai={{type(self.env.AI).__name__}}"
        )
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

    def write_entry(self, tag: str) -> None:
        (self.project / "src" / "entry.py").write_text(ENTRY.format(tag=tag))

    def request(self, hostname: str, path: str = "/") -> tuple[int, str]:
        """GET the worker: the platform's port, with wrangler's hostname as Host."""
        return self.ns.fetch(self.origin + path, host=hostname)

    def plane(self) -> ControlPlane:
        return ControlPlane(self.state)


def scene_in(tmp_path: Path, platform: str = "") -> Iterator[Scene]:
    """A Scene in ``tmp_path``, torn down when the generator closes; ``platform``: more keys of
    the operator's ``platform:`` section, as YAML lines indented by two."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "wrangler.toml").write_text(WRANGLER_TOML)
    (tmp_path / "home").mkdir()
    config = tmp_path / "ember.yaml"
    config.write_text("platform:\n  proof_of_work: {k: 200, g: 500, sample: 8}\n" + platform)
    ns = LoopbackNamespace()
    try:
        port = ns.start_platform(tmp_path / "state", config)
        origin = f"http://127.0.0.1:{port}"
        scene = Scene(
            ns, tmp_path / "state", project, tmp_path / "home", origin + "/client/v4", origin
        )
        scene.write_entry("v1")
        yield scene
    finally:
        ns.close()


def version_id(output: str) -> str:
    """The version id wrangler printed as current."""
    match = re.search(r"Current Version ID: ([0-9a-f-]{36})", output)
    assert match, output
    return match.group(1)
