"""Bad input to ember serve (issue 8): each gets a clear Cloudflare-style error, and the live
version keeps answering, unchanged, after every one of them."""

from __future__ import annotations

import httpx

from ember.runtime.deployments import pow
from tests.serve.conftest import ServeProcess, answer, permanent_account, put_worker, upload


def test_bad_input_never_touches_the_live_version(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "badin")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "live", answer("stable")).status_code == 200
    expected = serve.worker("badin", "live").text
    assert expected.startswith("stable ")
    script = f"/accounts/{account_id}/workers/scripts/live"
    good, headers = upload(answer("intruder"))
    no_meta = good.replace(b'name="metadata"', b'name="other"')
    unknown_binding, _ = upload(answer("x"), bindings=[{"name": "DB", "type": "d1"}])
    huge, _ = upload(answer("x") + "#" * (1024**2 + 10))  # the fixture's limit is 1 MiB
    cases: list[tuple[str, str, dict[str, str], bytes, int, int, str]] = [
        # (token, path, headers, body, status, code, words in the message)
        (token, script, {"content-type": "multipart/form-data; boundary=zz"}, b"junk", 400,
         10021, "boundary"),
        (token, script, headers, no_meta, 400, 10021, "no 'metadata' part"),
        (token, script, headers, unknown_binding, 400, 10021, "supported binding types"),
        (token, script, headers, huge, 413, 10027, "limit"),
        (token, script.replace(account_id, "f" * 32), headers, good, 403, 10000,
         "not allowed to use that account"),
        ("ember_wrong", script, headers, good, 401, 10000, "not valid"),
        ("", script, headers, good, 401, 10000, "send an API token"),
    ]  # fmt: skip
    for case_token, path, case_headers, body, status, code, words in cases:
        for method, suffix in (("PUT", ""), ("POST", "/versions")):
            client_headers = {"authorization": f"Bearer {case_token}"} if case_token else {}
            reply = httpx.request(
                method,
                serve.url + "/client/v4" + path + suffix,
                content=body,
                headers={**client_headers, **case_headers},
                timeout=60,
            )
            assert reply.status_code == status, (words, reply.text)
            error = reply.json()["errors"][0]
            assert error["code"] == code and words in error["message"], error
            assert serve.worker("badin", "live").text == expected


def test_wrong_and_replayed_proof_of_work_are_refused(serve: ServeProcess) -> None:
    with serve.api() as client:
        challenge = client.post("/provisioning/previews/challenge", json={}).json()["result"]
        wrong = client.post(
            "/provisioning/previews",
            json={
                "challengeToken": challenge["challengeToken"],
                "solution": {"checkpoints": "AAAA" * ((32 * (challenge["k"] + 1) + 2) // 3)},
            },
        )
        assert wrong.status_code == 400 and wrong.json()["errors"][0]["code"] == 1033
        solved = pow.solve_challenge(
            pow.Challenge(
                challenge["challengeToken"], challenge["seed"], challenge["k"], challenge["g"], 0.0
            )
        )
        body = {"challengeToken": challenge["challengeToken"], "solution": {"checkpoints": solved}}
        assert client.post("/provisioning/previews", json=body).status_code == 200
        replayed = client.post("/provisioning/previews", json=body)
        assert replayed.status_code == 400
        assert "already used" in replayed.json()["errors"][0]["message"]
