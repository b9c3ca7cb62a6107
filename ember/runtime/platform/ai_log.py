"""``ember serve --log-requests``: a line per call to the AI HTTP API, and one per AI call.

    2026-05-01T12:00:00.123Z AI POST /client/v4/accounts/ID/ai/run/MODEL 200 req=3f2a.. (41.2ms)
    2026-05-01T12:00:00.123Z AI call account=acme worker=- model=MODEL status=200 code=0
        tokens=12/2 req=3f2a.. (41.2ms)                                      (one line)
    2026-05-01T12:00:00.456Z AI call account=acme worker=asker model=MODEL status=429
        code=3036 tokens=-/- req=- (0.1ms)                                   (one line)

The first is the HTTP API's access line (every route, refusals before any model too); the
``AI call`` line is the gateway's, the same for a worker's ``env.AI.run`` (``worker=NAME``) and
the REST API (``worker=-``): account name, model, status and Workers AI code (0 for an answer),
tokens in/out, the request id (``cf-ai-req-id``, which the replica's own ``--log-requests`` line
names as ``x_request_id``; ``-`` when refused before it got one) and duration. The access line's
``req=`` is that id too, or for a refusal the ``x-request-id`` its client got (``ai/run`` and
``/ai/v1``: ``bindings/ai/rest_replies.py``). Lines are printed
when the answer has gone out (a stream's at its end). No bodies, as for workers. Lines of refusals
(an access line of status 400 or more, an ``AI call`` line with a code) go through
``refusal_log.py``, which writes an account's first few a minute and sums up the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute, Route

from ember.runtime.client_key import client_key
from ember.runtime.platform.stamp import utc_stamp

ACCOUNT_PREFIX = "account:"  # a tenant's data scope on the platform (bindings/ai/tenant.py)
# Where ``authorize`` (``ai.py``) leaves the authenticated account's id in the request's scope:
# an access line of a refusal counts against that account's lines, and one refused before
# anybody was authenticated against its client's (an account id in the path proves nothing).
ACCOUNT_SCOPE_KEY = "ember.ai_account"
Refusal = Callable[[str, str], None]  # (key, line): ``RefusalLog.line``
WORKER_MARK = "/worker:"
MODEL_CHARS = 200  # a model id comes from the tenant: a long one is cut, not printed whole


def with_access_log(
    routes: list[BaseRoute], print_line: Callable[[str], None], refusal: Refusal
) -> list[BaseRoute]:
    """``routes``, each HTTP route's app wrapped to print its line (a refusal's through
    ``refusal``)."""
    for route in routes:
        if isinstance(route, Route):
            route.app = _AccessLog(route.app, print_line, refusal)
    return routes


def refusal_key(call: Any) -> str:
    """Whose lines an ``AICall`` refusal counts against: its account (its data scope)."""
    return str(call.tenant.data).removeprefix(ACCOUNT_PREFIX)


def call_line(call: Any, account_name: Callable[[str], str]) -> str:
    """The ``AI call`` line of one ``AICall`` (``ember.bindings.ai.call_log``)."""
    account_id = call.tenant.data.removeprefix(ACCOUNT_PREFIX)
    _, marked, worker = call.tenant.quota.partition(WORKER_MARK)
    tokens = "/".join("-" if n is None else str(n) for n in (call.tokens_in, call.tokens_out))
    return (
        f"{utc_stamp()} AI call account={account_name(account_id)} "
        f"worker={worker if marked else '-'} model={call.model[:MODEL_CHARS]} "
        f"status={call.status} code={call.code} tokens={tokens} "
        f"req={call.request_id or '-'} ({call.duration_ms:.1f}ms)"
    )


class _AccessLog:
    def __init__(self, app: Any, print_line: Callable[[str], None], refusal: Refusal) -> None:
        self.app = app
        self.print_line = print_line
        self.refusal = refusal

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        seen: dict[str, Any] = {"status": 0, "request_id": ""}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for name, value in message.get("headers", ()):
                    # cf-ai-req-id on an answer; on a refusal, the x-request-id its client got
                    if name.lower() in (b"cf-ai-req-id", b"x-request-id"):
                        seen["request_id"] = seen["request_id"] or value.decode("latin-1")
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            status = seen["status"] or 499  # nothing went out: the client left first
            request = f" req={seen['request_id']}" if seen["request_id"] else ""
            elapsed = (time.perf_counter() - started) * 1000
            line = (
                f"{utc_stamp()} AI {scope.get('method', '')} {scope.get('path', '')} "
                f"{status}{request} ({elapsed:.1f}ms)"
            )
            if status < 400:
                self.print_line(line)
            else:
                account = scope.get(ACCOUNT_SCOPE_KEY)
                client = (scope.get("client") or ("-", 0))[0]
                self.refusal(account or f"client {client_key(str(client))}", line)
