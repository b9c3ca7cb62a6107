"""``Supervisor.call_refusal``: a deployment whose binding calls are refused (``ember serve``: a
temporary account past its expiry) gets every call, ``fetch`` included, refused with the reason
before any service sees it; the others' calls are not touched."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project

WORKER = """
from workers import Response, fetch

async def on_fetch(request, env):
    seen = []
    for call in (lambda: env.SLOW.wait("refused?"), lambda: fetch("http://127.0.0.1:9/")):
        try:
            await call()
            seen.append("ran")
        except Exception as exc:
            seen.append(f"{type(exc).__name__}: {exc}")
    return Response(" | ".join(seen))
"""
REASON = "this worker's temporary account expired at 2026-01-01T00:00:00Z"


def test_a_refused_deployment_reaches_no_service(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "refused", WORKER, "slow:\n  binding: SLOW\n")
    refused = harness.deploy(root)
    harness.supervisor.call_refusal = lambda ident: REASON if ident == refused else None
    try:
        with harness.client(refused) as client:
            text = client.get("/").text
    finally:
        harness.supervisor.call_refusal = None
    assert text == f"BindingError: {REASON} | BindingError: {REASON}", text
    assert harness.tracker().get("wait-started:refused?") == 0
