"""The client/v4 API over real HTTP (uvicorn on an ephemeral loopback port)."""

from __future__ import annotations

import httpx
import pytest

from tests.platform.conftest import RunningPlatform, worker_upload
from tests.platform.helpers import error_of, temporary_account


@pytest.fixture
def acme(platform: RunningPlatform) -> tuple[str, httpx.Client]:
    account, issued = platform.plane.accounts.create_permanent("acme")
    return account.id, platform.client(issued.token)


def put_script(
    client: httpx.Client, account_id: str, name: str, query: str = "", **kw: object
) -> httpx.Response:
    body, content_type = worker_upload(**kw)
    return client.put(
        f"/accounts/{account_id}/workers/scripts/{name}{query}",
        content=body,
        headers={"content-type": content_type, "user-agent": "wrangler/4.164.0"},
    )


def post_version(client: httpx.Client, account_id: str, name: str, **kw: object) -> httpx.Response:
    body, content_type = worker_upload(**kw)
    return client.post(
        f"/accounts/{account_id}/workers/scripts/{name}/versions?bindings_inherit=strict",
        content=body,
        headers={"content-type": content_type, "user-agent": "wrangler/4.164.0"},
    )


def live_version(client: httpx.Client, account_id: str, name: str) -> str:
    reply = client.get(f"/accounts/{account_id}/workers/scripts/{name}/deployments")
    return reply.json()["result"]["deployments"][0]["versions"][0]["version_id"]


def test_unknown_route_and_method_get_envelopes(platform: RunningPlatform) -> None:
    with platform.client() as client:
        assert error_of(client.get("/nope"))[:2] == (404, 7003)
        assert error_of(client.delete("/user"))[:2] == (405, 7001)
        assert error_of(client.get("/user"))[:2] == (401, 10000)


def test_first_deploy_then_redeploy_then_rollback(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    base = f"/accounts/{account_id}/workers"
    assert error_of(client.get(f"{base}/services/hello"))[:2] == (404, 10007)
    assert error_of(client.get(f"{base}/scripts/hello/deployments"))[:2] == (404, 10007)
    first = put_script(
        client,
        account_id,
        "hello",
        "?excludeScript=true&bindings_inherit=strict",
        bindings=[{"name": "S", "type": "secret_text", "text": "v1"}],
    )
    assert first.status_code == 200, first.text
    v1 = first.json()["result"]["deployment_id"]
    service = client.get(f"{base}/services/hello").json()["result"]
    assert service["default_environment"]["script"]["last_deployed_from"] == "wrangler"
    worker = client.get(f"{base}/workers/hello").json()["result"]
    assert worker["subdomain"]["url"].startswith("http://hello.acme.localhost:")

    second = post_version(
        client, account_id, "hello", source=b"print(2)\n", keep_bindings=["secret_text"]
    )
    v2 = second.json()["result"]["id"]
    assert second.json()["result"]["resources"]["script"]["etag"]
    assert live_version(client, account_id, "hello") == v1  # a version alone is not live
    deploy = client.post(
        f"{base}/scripts/hello/deployments",
        json={
            "strategy": "percentage",
            "versions": [{"version_id": v2, "percentage": 100}],
            "annotations": {},
        },
    )
    assert deploy.status_code == 200 and live_version(client, account_id, "hello") == v2
    assert client.get(f"{base}/scripts/hello").content == b"print(2)\n"

    secret = client.put(
        f"{base}/scripts/hello/secrets", json={"name": "NEW", "text": "x", "type": "secret_text"}
    )
    assert secret.json()["result"] == {"name": "NEW", "type": "secret_text"}
    rollback = {
        "strategy": "percentage",
        "versions": [{"version_id": v1, "percentage": 100}],
        "annotations": {"workers/message": "back"},
    }
    assert error_of(client.post(f"{base}/scripts/hello/deployments", json=rollback))[:2] == (
        400,
        10220,
    )
    forced = client.post(f"{base}/scripts/hello/deployments?force=true", json=rollback)
    annotations = forced.json()["result"]["annotations"]
    assert annotations["workers/triggered_by"] == "rollback"
    assert annotations["workers/message"] == "back"
    assert live_version(client, account_id, "hello") == v1
    versions = client.get(f"{base}/scripts/hello/versions?deployable=true").json()["result"]
    assert [v["number"] for v in versions["items"]] == [3, 2, 1]
    one = client.get(f"{base}/scripts/hello/versions/{v1}").json()["result"]
    assert one["resources"]["bindings"] == [{"name": "S", "type": "secret_text"}]
    assert "v1" not in str(one)


def test_bad_input_leaves_the_live_version_untouched(
    platform: RunningPlatform, acme: tuple[str, httpx.Client]
) -> None:
    account_id, client = acme
    assert put_script(client, account_id, "hello").status_code == 200
    live = live_version(client, account_id, "hello")
    url = f"/accounts/{account_id}/workers/scripts/hello"
    cases = [
        (b"not multipart", "multipart/form-data; boundary=zz", 10021, "boundary"),
        (b"{}", "application/json", 10021, "multipart/form-data"),
        (
            worker_upload()[0].replace(b'name="metadata"', b'name="other"'),
            worker_upload()[1],
            10021,
            "no 'metadata' part",
        ),
        (*worker_upload(bindings=[{"name": "DB", "type": "d1"}]), 10021, "supported binding"),
        (*worker_upload(main_module="missing.py"), 10021, "not one of the uploaded modules"),
        (
            *worker_upload(compatibility_date="2999-01-01"),
            10021,
            "Can't set compatibility date in the future: 2999-01-01",
        ),
        (*worker_upload(compatibility_date="2026-02-30"), 10021, "YYYY-MM-DD"),
        (*worker_upload(source=b"x" * (4 * 1024**2 + 10)), 10027, "limit"),
    ]
    for body, content_type, code, words in cases:
        for method in ("PUT", "POST"):
            path = url if method == "PUT" else url + "/versions"
            status, got, message = error_of(
                client.request(method, path, content=body, headers={"content-type": content_type})
            )
            assert got == code, message
            assert words is None or words in message
        assert live_version(client, account_id, "hello") == live
    assert len(client.get(url + "/versions").json()["result"]["items"]) == 1
    # A deployment naming an unknown version changes nothing either.
    bad = client.post(
        url + "/deployments", json={"versions": [{"version_id": "nope", "percentage": 100}]}
    )
    status, code, message = error_of(bad)
    assert (status, code) == (400, 10001) and "versions[0].version_id 'nope'" in message
    assert live_version(client, account_id, "hello") == live


def test_tokens_are_scoped_to_their_account(
    platform: RunningPlatform, acme: tuple[str, httpx.Client]
) -> None:
    acme_id, acme_client = acme
    assert put_script(acme_client, acme_id, "private").status_code == 200
    temp = temporary_account(platform)
    token = temp["account"]["apiToken"]
    with platform.client(token) as intruder:
        for path in (
            f"/accounts/{acme_id}/workers/scripts/private/deployments",
            f"/accounts/{acme_id}/workers/scripts",
            f"/accounts/{acme_id}/storage/kv/namespaces",
        ):
            denied = intruder.get(path)
            missing = intruder.get(path.replace(acme_id, "0" * 32))
            assert error_of(denied)[:2] == (403, 10000)
            assert denied.json() == missing.json()  # existence of the other account leaks not
            assert "acme" not in denied.text and "private" not in denied.text
        mine = intruder.get("/accounts").json()["result"]
        assert [a["id"] for a in mine] == [temp["account"]["id"]]
    with platform.client("ember_wrong") as wrong:
        assert error_of(wrong.get(f"/accounts/{acme_id}/workers/scripts"))[:2] == (401, 10000)


def test_temporary_account_flow_and_claim(platform: RunningPlatform) -> None:
    temp = temporary_account(platform)
    account = temp["account"]
    assert set(account) >= {"id", "name", "apiToken", "expiresAt"}
    assert temp["claim"]["url"].startswith(platform.url + "/claim-preview?claimToken=")
    page = httpx.get(temp["claim"]["url"], follow_redirects=True)  # via a cookie, no token
    assert page.status_code == 200 and account["name"] in page.text
    claimed = httpx.post(
        platform.url + "/claim-preview", data={"claimToken": temp["claim"]["token"]}
    )
    assert claimed.status_code == 200 and "is now permanent" in claimed.text
    with platform.client(account["apiToken"]) as old:
        assert old.get("/user/tokens/verify").status_code == 401
    assert httpx.get(temp["claim"]["url"]).status_code == 404


def test_oversized_claim_form_gets_an_html_413_and_claims_nothing(
    platform: RunningPlatform,
) -> None:
    temp = temporary_account(platform)
    token = temp["claim"]["token"]
    body = f"claimToken={token}&x=" + "a" * 20_000
    for streamed in (False, True):  # declared Content-Length, and a chunked body counted as read
        content = (
            body.encode()
            if not streamed
            else iter([body.encode()[:10_000], body.encode()[10_000:]])
        )
        refused = httpx.post(
            platform.url + "/claim-preview",
            content=content,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert refused.status_code == 413
        assert refused.headers["content-type"].startswith("text/html")
        assert "form" in refused.text and "16,384 bytes" in refused.text
        assert "Worker upload" not in refused.text
    page = httpx.get(temp["claim"]["url"], follow_redirects=True)
    assert page.status_code == 200  # still claimable


def test_replayed_and_wrong_proof_of_work(platform: RunningPlatform) -> None:
    with httpx.Client(base_url=platform.api) as client:
        challenge = client.post("/provisioning/previews/challenge", json={}).json()["result"]
        assert challenge["k"] * challenge["g"] <= 64_000_000
        wrong = client.post(
            "/provisioning/previews",
            json={
                "challengeToken": challenge["challengeToken"],
                "solution": {"checkpoints": "AAAA" * ((32 * (challenge["k"] + 1) + 2) // 3)},
            },
        )
        assert error_of(wrong)[0] == 400
        assert client.post("/provisioning/previews", json={}).status_code == 400
    temporary_account(platform)  # and a fresh one still works


def test_expired_temporary_token_is_refused_as_a_deleted_accounts(
    platform: RunningPlatform,
) -> None:
    # Expired is deleted, whether or not the sweep has removed the rows yet: the same answer as
    # a token nobody knows (the CLI says what expired, from the account it cached).
    temp = temporary_account(platform)
    platform.clock.advance(3601)
    with platform.client(temp["account"]["apiToken"]) as client:
        expired = error_of(client.get("/user/tokens/verify"))
    with platform.client("ember_never-issued") as client:
        unknown = error_of(client.get("/user/tokens/verify"))
    assert expired[:2] == (401, 10000) and expired == unknown


def test_whoami_calls(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    assert client.get("/user/tokens/verify").json()["result"]["status"] == "active"
    assert client.get("/user").json()["result"]["email"] == "acme@ember.localhost"
    assert client.get("/memberships").json()["result"][0]["account"]["id"] == account_id


def test_placeholder_worker_then_python_worker(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    base = f"/accounts/{account_id}/workers/scripts/hello-py"
    secret = {"name": "MY_SECRET", "text": "s3cr3t-value", "type": "secret_text"}
    assert error_of(client.put(base + "/secrets", json=secret))[:2] == (404, 10007)
    body, content_type = worker_upload(
        main="hello-py", source=b"export default { fetch() {} }", logpush=False
    )
    body = body.replace(b"text/x-python", b"application/javascript+module")
    draft = client.put(base, content=body, headers={"content-type": content_type})
    assert draft.status_code == 200, draft.text
    assert client.put(base + "/secrets", json=secret).status_code == 200
    upgraded = post_version(
        client, account_id, "hello-py", keep_bindings=["secret_text", "secret_key"]
    )
    version = upgraded.json()["result"]
    assert version["resources"]["bindings"] == [{"name": "MY_SECRET", "type": "secret_text"}]
    assert client.get(base + "/secrets").json()["result"] == [
        {"name": "MY_SECRET", "type": "secret_text"}
    ]
    # Path segments are percent-decoded.
    assert client.get(base + "/secrets/MY%5FSECRET").json()["result"]["name"] == "MY_SECRET"


def test_kv_namespaces_and_provisioning_like_wrangler(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    base = f"/accounts/{account_id}/storage/kv/namespaces"
    listed = client.get(base + "?per_page=100&order=title&direction=asc&page=1").json()
    assert listed["result"] == [] and listed["result_info"]["total_count"] == 0
    created = client.post(base, json={"title": "hello-kv"}).json()["result"]
    assert error_of(client.post(base, json={"title": "hello-kv"}))[:2] == (400, 10014)
    deployed = put_script(
        client,
        account_id,
        "hello",
        bindings=[{"name": "KV", "type": "kv_namespace", "namespace_id": created["id"]}],
    )
    assert deployed.status_code == 200
    again = post_version(client, account_id, "hello", bindings=[{"name": "KV", "type": "inherit"}])
    kv = again.json()["result"]["resources"]["bindings"][0]
    assert kv == {"name": "KV", "type": "kv_namespace", "namespace_id": created["id"]}
    assert error_of(client.get(base + "/" + "f" * 32))[:2] == (404, 10013)


def test_delete_sequence(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    put_script(client, account_id, "gone")
    base = f"/accounts/{account_id}/workers"
    assert client.get(f"{base}/scripts/gone/references").status_code == 200
    assert client.get(f"{base}/tails/by-consumer/gone").json()["result"] == []
    assert client.get(f"{base}/durable_objects/namespaces?per_page=1000&page=1").status_code == 200
    assert client.delete(f"{base}/services/gone?force=false").status_code == 200
    assert error_of(client.get(f"{base}/services/gone"))[:2] == (404, 10007)


def test_a_create_only_upload_never_replaces_a_worker(acme: tuple[str, httpx.Client]) -> None:
    """``If-None-Match: *`` (ember's secret-put draft sends it): the first creates the Worker,
    a second is refused with 412 and the live version stays."""
    account_id, client = acme

    def create_only(source: bytes) -> httpx.Response:
        body, content_type = worker_upload(source=source)
        return client.put(
            f"/accounts/{account_id}/workers/scripts/once",
            content=body,
            headers={"content-type": content_type, "if-none-match": "*"},
        )

    assert create_only(b"print('first')\n").status_code == 200
    live = live_version(client, account_id, "once")
    status, code, message = error_of(create_only(b"print('second')\n"))
    assert (status, code) == (412, 10001) and "already exists" in message
    assert live_version(client, account_id, "once") == live
    versions = client.get(f"/accounts/{account_id}/workers/scripts/once/versions").json()
    assert len(versions["result"]["items"]) == 1
    assert put_script(client, account_id, "once").status_code == 200  # a plain PUT replaces
