"""The real ``cloudflare`` Python SDK (5.9) against ember serve, ending at the worker's URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account

cloudflare = pytest.importorskip("cloudflare")

# ember serve answers only the ids its operator configured (the shipped checkpoint serves it).
CONFIG = (
    BASE_CONFIG + 'ai:\n  models:\n    "@cf/moonshotai/kimi-k2.5": {args: [--torch-threads, "1"]}\n'
)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("sdk") / "state", CONFIG)
    yield process
    process.stop()


SOURCE = b"""\
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        stored = await self.env.KV.get("greeting")
        return Response(f"sdk {self.env.GREETING} {stored} {getattr(self.env, 'TOKEN', None)}")
"""


def test_sdk_update_kv_values_secrets_and_ai(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "sdkacct")
    client = cloudflare.Cloudflare(
        api_token=token, base_url=serve.url + "/client/v4", max_retries=0
    )
    namespace = client.kv.namespaces.create(account_id=account_id, title="sdk-kv")
    script = client.workers.scripts.update(
        "sdk-py",
        account_id=account_id,
        metadata={
            "main_module": "entry.py",
            "compatibility_date": "2026-11-01",
            "compatibility_flags": ["python_workers"],
            "bindings": [
                {"name": "GREETING", "type": "plain_text", "text": "hi"},
                {"name": "KV", "type": "kv_namespace", "namespace_id": namespace.id},
            ],
        },
        files=[("entry.py", SOURCE, "text/x-python")],
    )
    assert script.id == "sdk-py" and script.etag
    assert serve.worker("sdkacct", "sdk-py").text == "sdk hi None None"

    client.kv.namespaces.values.update(
        "greeting",
        account_id=account_id,
        namespace_id=namespace.id,
        value=b"hello there",
        metadata={"a": 1},
    )
    value = client.kv.namespaces.values.get(
        "greeting", account_id=account_id, namespace_id=namespace.id
    )
    assert value.read() == b"hello there"
    metadata = client.kv.namespaces.metadata.get(
        "greeting", account_id=account_id, namespace_id=namespace.id
    )
    assert metadata == {"a": 1}
    client.workers.scripts.secrets.update(
        "sdk-py", account_id=account_id, name="TOKEN", text="s3", type="secret_text"
    )
    assert serve.worker("sdkacct", "sdk-py").text == "sdk hi hello there s3"
    assert [s.id for s in client.workers.scripts.list(account_id=account_id)] == ["sdk-py"]

    # Workers AI over REST: the SDK percent-encodes the model name (@cf%2Fember%2F...); the
    # platform decodes it, authorizes the account and hands it to the model pool, which knows
    # no such model: Workers AI's 5007, naming it.
    with pytest.raises(cloudflare.APIStatusError) as unknown:
        client.ai.run("@cf/ember/no-such-model", account_id=account_id, prompt="hi")
    assert "5007" in str(unknown.value) and "@cf/ember/no-such-model" in str(unknown.value)


@pytest.mark.slow
def test_sdk_ai_run_answers_from_the_model_pool(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "sdkai")
    client = cloudflare.Cloudflare(
        api_token=token, base_url=serve.url + "/client/v4", max_retries=0
    )
    result = client.ai.run(
        "@cf/moonshotai/kimi-k2.5",
        account_id=account_id,
        messages=[{"role": "user", "content": "Say hi."}],
        max_tokens=4,
    )
    assert result["object"] == "chat.completion", result
    assert result["usage"]["completion_tokens"] >= 1
