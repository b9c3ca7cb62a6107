"""A ``fetch`` URL the HTTP client cannot parse is the handler's ``TypeError`` naming the URL and
what is wrong with it (workerd's ``TypeError: Fetch API cannot load: ...``), never "internal
error in binding __fetch__" and a traceback on the operator's log for every call."""

from __future__ import annotations

import json

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

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
