"""``env.AI``'s last-request attributes, as the platform's binding keeps them (lastRequestId,
aiGatewayLogId, lastRequestHttpStatusCode, lastRequestInternalStatusCode), after a failure too.
Failures are checked before any model is needed, so nothing is loaded here."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project

WORKER = """
from workers import Response

NAMES = ("lastRequestId", "aiGatewayLogId", "lastRequestHttpStatusCode",
         "lastRequestInternalStatusCode")


def snapshot(ai):
    return {name: getattr(ai, name) for name in NAMES}


async def on_fetch(request, env):
    before = snapshot(env.AI)
    seen = []
    for model, inputs in (("@cf/x/y", {"prompt": "hi"}),
                          ("@cf/zai-org/glm-4.7-flash", {"prompt": ""})):
        try:
            await env.AI.run(model, inputs)
        except Exception as error:
            seen.append({"error": str(error), **snapshot(env.AI)})
    logged = {}
    try:
        await env.AI.run("@cf/zai-org/glm-4.7-flash", {"prompt": ""},
                         {"gateway": {"id": "gw", "metadata": {"user": "u1"}}})
    except Exception as error:
        log_id = env.AI.aiGatewayLogId
        logged = {"error": str(error), "log_id": log_id,
                  "log": await env.AI.gateway("gw").getLog(log_id) if log_id else None}
    return Response.json({"before": before, "after": seen, "logged": logged})
"""


def test_attributes_exist_and_follow_failures(tmp_path: Path) -> None:
    harness = Harness(tmp_path / "state")
    try:
        root = write_project(tmp_path / "project", WORKER, "ai:\n  binding: AI\n")
        with harness.client(harness.deploy(root)) as client:
            body = client.get("/").json()
    finally:
        harness.close()
    assert body["before"] == {
        "lastRequestId": None,
        "aiGatewayLogId": None,
        "lastRequestHttpStatusCode": None,
        "lastRequestInternalStatusCode": None,
    }
    missing, invalid = body["after"]
    assert missing["error"].startswith("5007: ")
    assert (missing["lastRequestHttpStatusCode"], missing["lastRequestInternalStatusCode"]) == (
        400,
        5007,
    )
    assert invalid["lastRequestInternalStatusCode"] == 5006
    assert invalid["lastRequestId"] is None  # never the id of an earlier request


def test_a_failed_gateway_call_is_logged_as_the_platform_logs_it(tmp_path: Path) -> None:
    """The platform's binding reads ``cf-aig-log-id`` before it checks the status, and AI
    Gateway logs failed requests too: the handler can look its failure up with ``getLog``."""
    harness = Harness(tmp_path / "state")
    try:
        root = write_project(tmp_path / "project", WORKER, "ai:\n  binding: AI\n")
        with harness.client(harness.deploy(root)) as client:
            logged = client.get("/").json()["logged"]
    finally:
        harness.close()
    assert logged["error"].startswith("5006: "), logged
    assert isinstance(logged["log_id"], str) and len(logged["log_id"]) == 26
    log = logged["log"]
    assert (log["id"], log["success"], log["status_code"]) == (logged["log_id"], False, 400)
    assert log["metadata"] == {"user": "u1"} and log["tokens_out"] is None
    assert '"internalCode": 5006' in log["response_head"]
