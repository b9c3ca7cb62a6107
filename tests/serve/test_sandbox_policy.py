"""``ember serve`` refuses anonymous (temporary) deployments below the sandbox minimum, unless
the operator explicitly allows them; permanent accounts keep deploying either way."""

from __future__ import annotations

from pathlib import Path

from tests.serve.conftest import (
    BASE_CONFIG,
    ServeProcess,
    answer,
    permanent_account,
    put_worker,
    temporary_account,
)

WEAK = ("--disable-sandbox-layers", "seccomp,landlock")  # below the anonymous minimum


def test_below_the_minimum_temporary_accounts_are_refused(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG, *WEAK)
    try:
        output = serve.output()
        assert "[--] seccomp" in output and "anonymous deployments: refused" in output
        with serve.api() as client:
            refused = client.post("/provisioning/previews/challenge", json={})
        assert refused.status_code == 403
        error = refused.json()["errors"][0]
        assert error["code"] == 1034 and "seccomp or landlock" in error["message"]
        account_id, token = permanent_account(serve, "trusted")
        with serve.api(token) as api:
            assert put_worker(api, account_id, "ok", answer("full")).status_code == 200
        assert serve.worker("trusted", "ok").text.startswith("full ")
    finally:
        serve.stop()


def test_the_operator_may_allow_them_explicitly(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG, *WEAK, "--allow-unsandboxed-anonymous")
    try:
        assert "ALLOWED BELOW MINIMUM by the operator" in serve.output()
        created = temporary_account(serve)
        account = created["account"]  # type: ignore[index]
        with serve.api(account["apiToken"]) as api:  # type: ignore[index]
            assert put_worker(api, account["id"], "anon", answer("anon")).status_code == 200  # type: ignore[index]
        assert serve.worker(account["name"], "anon").text.startswith("anon ")  # type: ignore[index]
    finally:
        serve.stop()
