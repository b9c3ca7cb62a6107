"""What one temporary account (anyone, no login) may take of what every account shares on a real
``ember serve``: KV operations per UTC day and Workers AI neurons per UTC day (Cloudflare's Free
plan numbers by default), and the disk all temporary accounts together may fill
(``platform.temporary.max_total_stored_bytes``). Each refusal speaks as the platform does.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve.conftest import ServeProcess, put_worker, temporary_account

CONFIG = """\
platform:
  proof_of_work: {k: 64, g: 64, sample: 8}
  temporary:
    kv_writes_per_day: 3
    kv_reads_per_day: 50
"""
KV_WORKER = """\
from workers import Response

async def on_fetch(request, env):
    said = []
    for index in range(int(request.url.rsplit("/", 1)[1])):
        try:
            await env.KV.put(f"k{index}", "v")
            said.append("stored")
        except Exception as exc:
            said.append(str(exc))
    return Response("|".join(said))
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("free-plan") / "state", CONFIG)
    yield process
    process.stop()


def test_kv_writes_per_day_of_a_temporary_account(serve: ServeProcess) -> None:
    account = temporary_account(serve)["account"]
    account_id, name = account["id"], account["name"]  # type: ignore[index]
    with serve.api(account["apiToken"]) as api:  # type: ignore[index]
        made = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"})
        namespace = made.json()["result"]["id"]
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        assert api.put(f"{values}/rest", content=b"1").status_code == 200
        binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "writer", KV_WORKER, bindings=binding).status_code == 200
        # The REST write and the worker's share the account's three writes a day.
        said = serve.worker(name, "writer", "/put/4").text.split("|")
        assert said == ["stored", "stored"] + ["KV put() limit exceeded for the day."] * 2
        refused = api.put(f"{values}/late", content=b"2")
        assert refused.status_code == 429
        assert refused.json()["errors"][0]["code"] == 10048
        # Reads are their own allowance: the stored keys are still there to read.
        assert api.get(f"{values}/k1").content == b"v"
