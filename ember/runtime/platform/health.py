"""``GET /health`` on ``ember serve``: the platform answers, and how its model pool stands.

What an operator's load balancer or monitor polls (SGLang's router and vLLM answer ``/health``
too): 200 while the platform serves, with each configured model's replicas (state, requests in
flight, restarts) and queue, and whether the operator runs tenants' workers unwalled from the
platform's state (``trusted_workers``, ``--trusted-workers``). Nothing in it says where a
replica runs or how it was started: the port is the tenants' too, and those details are the
operator's log's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def health_route(
    gateway: Callable[[], Any | None], tenancy: Callable[[], dict[str, Any]] = dict
) -> Route:
    """The route; ``gateway`` gives the AI gateway, or None where this build has none;
    ``tenancy`` whether workers are walled off from the platform's state (``trusted_workers``:
    the operator ran them unwalled on purpose, which a monitor should be able to see)."""

    async def health(request: Request) -> Response:
        served = gateway()
        models = [] if served is None else [_model(row) for row in served.pool.status()]
        return JSONResponse({"status": "ok", **tenancy(), "models": models})

    return Route("/health", health, methods=["GET"])


def _model(row: Any) -> dict[str, Any]:
    return {
        "id": row.model_id,
        "loaded": row.loaded,
        "queued": row.queued,
        "replicas": [
            {"state": r.state, "outstanding": r.outstanding, "restarts": r.restarts}
            for r in row.replicas
        ],
    }
