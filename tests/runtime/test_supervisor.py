"""The supervisor as ``ember serve`` will use it: many deployments, each scoped to its own state."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project

KV_WORKER = """
from workers import Response

async def fetch(request, env, ctx):
    if request.method == "PUT":
        await env.KV.put("shared-key", await request.text())
        return Response("stored")
    value = await env.KV.get("shared-key")
    return Response(str(value))
"""


def test_deployments_see_only_their_own_kv_namespaces(harness: Harness, tmp_path: Path) -> None:
    a = harness.deploy(
        write_project(
            tmp_path / "tenant-a", KV_WORKER, "kv_namespaces:\n  - binding: KV\n    id: ns-a\n"
        )
    )
    b = harness.deploy(
        write_project(
            tmp_path / "tenant-b", KV_WORKER, "kv_namespaces:\n  - binding: KV\n    id: ns-b\n"
        )
    )
    with harness.client(a) as client_a, harness.client(b) as client_b:
        assert client_a.put("/", content="from a").text == "stored"
        assert client_b.get("/").text == "None"
        assert client_a.get("/").text == "from a"


def test_a_binding_name_outside_the_deployment_is_refused(harness: Harness, tmp_path: Path) -> None:
    worker = """
    from workers import Response, WorkerEntrypoint
    from ember.runtime.isolate.scope import current_scope

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            try:
                await current_scope().channel.call("OTHER_TENANTS_KV", "get", ["k", None])
            except Exception as exc:
                return Response(str(exc))
            return Response("reached it")
    """
    deployment_id = harness.deploy(write_project(tmp_path / "prober", worker))
    with harness.client(deployment_id) as client:
        assert client.get("/").text == "env has no binding named 'OTHER_TENANTS_KV'"


def test_removed_deployments_answer_404(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(write_project(tmp_path / "gone", KV_WORKER))
    harness.run(harness.supervisor.remove(deployment_id))
    with harness.client(deployment_id) as client:
        response = client.get("/")
    assert (response.status_code, response.headers["x-ember-error"]) == (404, "not_found")
