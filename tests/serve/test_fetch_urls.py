"""A ``fetch`` URL the HTTP client cannot parse is the handler's ``TypeError`` naming the URL and
what is wrong with it (workerd's ``TypeError: Fetch API cannot load: ...``), never "internal
error in binding __fetch__" and a traceback on the operator's log for every call."""

from __future__ import annotations

import json

from tests.serve.conftest import ServeProcess, permanent_account, put_worker, temporary_account

URLS = {
    "http://0177.0.0.1:18787/": "Invalid IPv4 address",  # octal, which httpx refuses
    "http://256.1.1.1/": "Invalid IPv4 address",
    "http://[::1/": "Invalid IPv6 URL",
    "http://a..b/": "label empty or too long",
    "http://xn--/": "Punycode",
}
WORKER = f"""\
import json
from workers import Response, fetch

URLS = {list(URLS)!r}


async def on_fetch(request, env):
    seen = {{}}
    for url in URLS:
        try:
            await fetch(url)
            seen[url] = "fetched"
        except TypeError as exc:
            seen[url] = f"TypeError: {{exc}}"
        except Exception as exc:
            seen[url] = f"{{type(exc).__name__}}: {{exc}}"
    return Response(json.dumps(seen))
"""


def test_a_malformed_fetch_url_is_the_handlers_type_error(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "badurls")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "urls", WORKER).status_code == 200
    logged_before = serve.output()
    reply = serve.worker("badurls", "urls")
    assert reply.status_code == 200, reply.text
    seen = json.loads(reply.text)
    for url, why in URLS.items():
        assert seen[url].startswith(f"TypeError: Fetch API cannot load: {url} ("), seen[url]
        assert why in seen[url], seen[url]
    logged = serve.output()[len(logged_before) :]
    assert "Traceback" not in logged and "__fetch__" not in logged, logged


COUNTER = """\
from workers import Response, fetch


async def on_fetch(request, env):
    for made in range(1, 10_001):
        try:
            await fetch("http://0177.0.0.1/")  # refused, yet counted as a subrequest
        except TypeError:
            continue
        except Exception as exc:
            return Response(f"{made}: {type(exc).__name__}: {exc}")
    return Response("no limit")
"""


def test_a_temporary_account_gets_workers_frees_fifty_subrequests(serve: ServeProcess) -> None:
    created = temporary_account(serve)
    account = created["account"]  # type: ignore[index]
    with serve.api(account["apiToken"]) as api:  # type: ignore[index]
        assert put_worker(api, account["id"], "counter", COUNTER).status_code == 200  # type: ignore[index]
        over = put_worker(api, account["id"], "greedy", COUNTER, limits={"subrequests": 51})  # type: ignore[index]
    assert serve.worker(account["name"], "counter").text == (  # type: ignore[index]
        "51: LimitExceeded: Too many subrequests."
    )
    assert over.status_code == 400 and over.json()["errors"][0]["code"] == 100328, over.text
    assert "at most 50" in over.json()["errors"][0]["message"]
