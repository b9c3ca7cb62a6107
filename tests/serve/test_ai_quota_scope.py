"""ember serve: a worker's ``ai.limits`` count all its versions together, and another worker of
the same account has its own bucket (the quota scope of ``bindings/ai/tenant.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.serve.conftest import ServeProcess, permanent_account, put_worker, tiny_ai_config

MODEL = "@cf/zai-org/glm-4.7-flash"
CONFIG = tiny_ai_config(MODEL, "{requests_per_minute: 2}")
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.AI.run("{MODEL}", {{"prompt": "hi", "max_tokens": 1}})
        return Response("ok")
    except Exception as exc:
        return Response(str(exc)[:120], status=429)
"""
AI = [{"name": "AI", "type": "ai"}]


def test_a_new_version_does_not_refill_the_workers_bucket(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG)
    try:
        account, token = permanent_account(serve, "q")
        with serve.api(token) as api:
            assert put_worker(api, account, "w", WORKER, bindings=AI).status_code == 200
            first = [serve.worker("q", "w").status_code for _ in range(2)]
            assert put_worker(api, account, "w", WORKER + "# v2\n", bindings=AI).status_code == 200
            after_upload = serve.worker("q", "w")
            assert put_worker(api, account, "other", WORKER, bindings=AI).status_code == 200
            other = serve.worker("q", "other").status_code
        assert first == [200, 200]
        assert after_upload.status_code == 429 and "3036" in after_upload.text
        assert other == 200  # another worker of the account: its own bucket
    finally:
        serve.stop()
