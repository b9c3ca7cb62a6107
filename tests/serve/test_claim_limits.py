"""Claiming a temporary account on a real ``ember serve``: a per-client cap on claims
(``platform.temporary.claims_per_day``), counted alike by the API, the claim page and
``ember claim``; and the operator's switch ``platform.temporary.claim: off``, which refuses
claims and keeps every message from promising one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import ROOT, ServeProcess, put_worker, temporary_account

CAPPED = """\
platform:
  proof_of_work: {k: 64, g: 64, sample: 8}
  temporary:
    claims_per_day: 2
"""
# ``off`` unquoted: YAML 1.1 reads it as false, which must mean the same as "off".
CLOSED = """\
platform:
  proof_of_work: {k: 64, g: 64, sample: 8}
  temporary:
    claim: off
    max_workers: 1
"""
WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("hi")
"""


def _ember(serve: ServeProcess, home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBER_", "CLOUDFLARE_"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "EMBER_CREDENTIALS": str(home / "credentials.json"),
        "EMBER_PLATFORM": serve.url,
    }
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("claimcap") / "state", CAPPED)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("claimoff") / "state", CLOSED)
    yield process
    process.stop()


def _kind(serve: ServeProcess, account_id: str) -> str:
    plane = serve.plane()
    try:
        return plane.accounts.get(account_id).kind
    finally:
        plane.close()


def test_claims_per_client_are_capped_alike_by_api_page_and_cli(
    capped: ServeProcess, tmp_path: Path
) -> None:
    first, second, third = (temporary_account(capped) for _ in range(3))
    with capped.api() as anonymous:
        by_api = anonymous.post(
            "/provisioning/previews/claim",
            json={"claimToken": first["claim"]["token"]},  # type: ignore[index]
        )
    assert by_api.status_code == 200, by_api.text
    by_page = httpx.post(
        capped.url + "/claim-preview",
        data={"claimToken": second["claim"]["token"]},  # type: ignore[index]
    )
    assert by_page.status_code == 200 and "is now permanent" in by_page.text, by_page.text

    # The window resets a day after this client's oldest claim in it.
    plane = capped.plane()
    try:
        oldest = plane.accounts.get(first["account"]["id"]).claimed_at  # type: ignore[index]
    finally:
        plane.close()
    assert oldest is not None
    resets = datetime.fromtimestamp(oldest + 86400, UTC).isoformat(timespec="seconds")
    resets = resets.replace("+00:00", "Z")

    token = third["claim"]["token"]  # type: ignore[index]
    with capped.api() as anonymous:
        refused = anonymous.post("/provisioning/previews/claim", json={"claimToken": token})
    assert refused.status_code == 429, refused.text
    error = refused.json()["errors"][0]
    assert error["code"] == 971
    message = error["message"]
    assert "platform.temporary.claims_per_day" in message and "limit is 2" in message, message
    assert resets in message, (resets, message)
    assert 0 < int(refused.headers["retry-after"]) <= 86400

    page = httpx.post(capped.url + "/claim-preview", data={"claimToken": token})
    assert page.status_code == 429 and "claims_per_day" in page.text and resets in page.text

    home = tmp_path / "home"
    cli = _ember(capped, home, tmp_path, "claim", str(third["claim"]["url"]))  # type: ignore[index]
    assert cli.returncode != 0, cli.stdout
    assert "claims_per_day" in cli.stderr and resets in cli.stderr, cli.stderr

    # Nothing of the refused claims went through: the account is still temporary and its
    # claim link still works for a client under the cap.
    assert _kind(capped, third["account"]["id"]) == "temporary"  # type: ignore[index]
    assert httpx.get(str(third["claim"]["url"])).status_code == 303  # type: ignore[index]


def test_claim_off_refuses_claims_and_promises_none(closed: ServeProcess, tmp_path: Path) -> None:
    created = temporary_account(closed)
    assert created["claim"]["claimable"] is False  # type: ignore[index]
    account_id = created["account"]["id"]  # type: ignore[index]
    token = created["claim"]["token"]  # type: ignore[index]

    with closed.api() as anonymous:
        refused = anonymous.post("/provisioning/previews/claim", json={"claimToken": token})
    assert refused.status_code == 403, refused.text
    message = refused.json()["errors"][0]["message"]
    assert "turned off on this platform" in message and "operator" in message, message

    # The claim link's page says so instead of offering a button, and its form refuses too.
    page = httpx.get(str(created["claim"]["url"]), follow_redirects=True)  # type: ignore[index]
    assert page.status_code == 403, page.text
    assert "turned off on this platform" in page.text and "<button" not in page.text
    posted = httpx.post(closed.url + "/claim-preview", data={"claimToken": token})
    assert posted.status_code == 403 and "turned off on this platform" in posted.text
    assert _kind(closed, account_id) == "temporary"

    # A temporary account's refusals name no claim as the way out.
    with closed.api(created["account"]["apiToken"]) as api:  # type: ignore[index]
        assert put_worker(api, account_id, "one", WORKER).status_code == 200
        over = put_worker(api, account_id, "two", WORKER)
    assert over.status_code == 403
    refusal = over.json()["errors"][0]["message"]
    assert "claim the account" not in refusal and "operator for an account" in refusal, refusal

    # ember deploy --temporary neither prints a claim URL nor says "unless claimed".
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "ember.yaml").write_text(
        'name: offhello\nmain: src/entry.py\ncompatibility_date: "2026-11-01"\n'
    )
    (project / "src" / "entry.py").write_text(WORKER)
    home = tmp_path / "home"
    deployed = _ember(closed, home, project, "deploy", "--temporary")
    assert deployed.returncode == 0, deployed.stderr
    said = deployed.stdout + deployed.stderr
    assert "Claim" not in said and "claimed" not in said, said
    assert re.search(r"claiming is turned off on this platform", said), said
    again = _ember(closed, home, project, "deploy", "--temporary", "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert "claim_url" not in result and "claim_command" not in result, result
    assert result["claimable"] is False
    whoami = _ember(closed, home, project, "whoami")
    assert whoami.returncode == 0, whoami.stderr
    assert "claim" not in whoami.stdout.replace("claiming is turned off", ""), whoami.stdout
