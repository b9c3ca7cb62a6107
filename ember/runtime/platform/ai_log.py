"""``ember serve --log-requests``: one line per call to the AI HTTP API, as workers' requests get.

    AI POST /client/v4/accounts/acme/ai/run/@cf/zai-org/glm-4.7-flash 200 req=3f2a... (41.2ms)

The request id is the answer's ``cf-ai-req-id``, which the replica's own ``--log-requests`` line
names as ``x_request_id``; the line is printed when the answer has gone out (a stream's at its
end). No bodies, as for workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute, Route


def with_access_log(routes: list[BaseRoute], print_line: Callable[[str], None]) -> list[BaseRoute]:
    """``routes``, each HTTP route's app wrapped to print its line."""
    for route in routes:
        if isinstance(route, Route):
            route.app = _AccessLog(route.app, print_line)
    return routes


class _AccessLog:
    def __init__(self, app: Any, print_line: Callable[[str], None]) -> None:
        self.app = app
        self.print_line = print_line

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        seen: dict[str, Any] = {"status": 0, "request_id": ""}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for name, value in message.get("headers", ()):
                    if name.lower() == b"cf-ai-req-id":
                        seen["request_id"] = value.decode("latin-1")
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            status = seen["status"] or 499  # nothing went out: the client left first
            request = f" req={seen['request_id']}" if seen["request_id"] else ""
            elapsed = (time.perf_counter() - started) * 1000
            self.print_line(
                f"AI {scope.get('method', '')} {scope.get('path', '')} {status}{request} "
                f"({elapsed:.1f}ms)"
            )
