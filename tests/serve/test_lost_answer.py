"""The platform goes away after it took a request and before it answered: ember's CLI says the
connection closed before an answer, not that it could not reach the platform, and for a call
that writes, that its outcome is unknown and which command shows it. A proxy in front of a real
``ember serve`` (``cutting_proxy.py``) passes the request on, lets the platform do the work, and
closes the connection with the answer unsent: the deploy really happened, as the message warns
it may have."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import ServeProcess, permanent_account
from tests.serve.cutting_proxy import CuttingProxy

ROOT = Path(__file__).resolve().parents[2]
WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("here")
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("lost") / "state")
    yield process
    process.stop()


def _ember(
    url: str, token: str, cwd: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "EMBER_CREDENTIALS": str(cwd / "credentials.json"),
        "EMBER_PLATFORM": url,
        "EMBER_API_TOKEN": token,
    }
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _lost(proxy: CuttingProxy, result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert proxy.cuts, "nothing was cut"
    said = result.stderr
    assert f"{proxy.url} closed the connection before answering" in said, said
    assert "cannot reach" not in said and ".." not in said and "Traceback" not in said, said
    return said


def test_lost_answers_to_writes_say_the_outcome_is_unknown_and_how_to_check(
    serve: ServeProcess, tmp_path: Path
) -> None:
    account_id, token = permanent_account(serve, "lost")
    (tmp_path / "ember.yaml").write_text("name: lostapp\nmain: worker.py\n")
    (tmp_path / "worker.py").write_text(WORKER)

    def writes_to(fragment: str) -> CuttingProxy:
        return CuttingProxy(serve.url, lambda method, path: method != "GET" and fragment in path)

    deploy = writes_to("/workers/scripts/lostapp")
    said = _lost(deploy, _ember(deploy.url, token, tmp_path, "deploy"))
    assert "whether it was done is unknown" in said, said
    assert "`ember versions list`" in said and "`ember deployments status`" in said, said
    assert serve.worker("lost", "lostapp").text == "here"  # it was: "unknown" was the truth

    secret = writes_to("/secrets")
    said = _lost(secret, _ember(secret.url, token, tmp_path, "secret", "put", "S", stdin="v\n"))
    assert "whether it was done is unknown" in said and "`ember secret list`" in said, said

    with serve.api(token) as api:
        namespace = api.post(
            f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "lost"}
        ).json()["result"]["id"]
    kv = writes_to("/values/")
    put = _ember(kv.url, token, tmp_path, "kv", "key", "put", "k", "v", "--namespace-id",
                 namespace, "--remote")  # fmt: skip
    said = _lost(kv, put)
    assert "whether it was done is unknown" in said and "`ember kv key list" in said, said


def test_a_lost_answer_to_a_read_says_nothing_changed(serve: ServeProcess, tmp_path: Path) -> None:
    _, token = permanent_account(serve, "lostread")
    reads = CuttingProxy(serve.url, lambda method, path: "/workers/scripts/x" in path)
    said = _lost(reads, _ember(reads.url, token, tmp_path, "versions", "list", "--name", "x"))
    assert "nothing was changed" in said and "unknown" not in said, said
    assert httpx.get(serve.url + "/health", timeout=30).status_code == 200
