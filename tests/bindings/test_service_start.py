"""A binding service that cannot be built fails the calls that need it, never the isolate.

The real cause here is one a user meets: the KV store's file under the state directory is not
an SQLite database (a half-copied or foreign file). ``env.KV.get`` must raise a clear error
naming the binding and the file, requests that do not touch KV keep being served by the same
isolate, and once the file is moved away the next call builds the service and works.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.bindings.kv.service import STORE_FILE
from tests.runtime.harness import Harness, write_project

WORKER = """
import os
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.endswith("/pid"):
            return Response(str(os.getpid()))
        try:
            value = await self.env.KV.get("k")
        except Exception as exc:
            return Response(f"{type(exc).__name__}: {exc}", status=500)
        return Response(f"value={value}")
"""


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, Path]]:
    state = tmp_path_factory.mktemp("broken-state")
    (state / STORE_FILE).write_bytes(b"this is not an SQLite database\n" * 200)
    harness = Harness(state)
    yield harness, state
    harness.close()


def test_failing_service_fails_only_its_call(broken: tuple[Harness, Path], tmp_path: Path) -> None:
    harness, state = broken
    root = write_project(tmp_path / "kvbroken", WORKER, "kv_namespaces:\n  - binding: KV\n")
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        pid = client.get("/pid")
        assert pid.status_code == 200
        failed = client.get("/kv")
        assert failed.status_code == 500, failed.text
        # The binding's own kind of error, naming the binding, the file and the cause.
        assert failed.text.startswith("ServiceError: "), failed.text
        assert "env.KV: the kv_namespace binding is unavailable" in failed.text
        assert STORE_FILE in failed.text and "not a database" in failed.text
        # The same isolate is still serving (it was not restarted by the failure).
        again = client.get("/pid")
        assert again.status_code == 200 and again.text == pid.text
        assert client.get("/kv").status_code == 500  # still broken: tried again, same answer
        # Fixed by the user: the next call builds the service.
        (state / STORE_FILE).unlink()
        fixed = client.get("/kv")
        assert fixed.status_code == 200, fixed.text
        assert fixed.text == "value=None"
        assert client.get("/pid").text == pid.text
