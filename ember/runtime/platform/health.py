"""``GET /health`` on ``ember serve``: the platform answers, and how its model pool stands.

What an operator's load balancer or monitor polls (SGLang's router and vLLM answer ``/health``
too): 200 while the platform serves, with each configured model's replicas (state, requests in
flight, restarts) and queue, and whether the operator runs tenants' workers unwalled from the
platform's state (``trusted_workers``, ``--trusted-workers``). Nothing in it says where a
replica runs or how it was started: the port is the tenants' too, and those details are the
operator's log's.

``status`` is ``degraded`` (still 200: reads and workers still answer) while a store of the state
directory cannot be written for want of space: ``storage.failures`` names each failing store
(``control-plane database``, ``KV store``, ``worker files``), why, since when, the last time and
how many writes failed, until a write of it succeeds (``ember/storage.py``); no paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ember.storage import StorageHealth


def health_route(
    gateway: Callable[[], Any | None],
    tenancy: Callable[[], dict[str, Any]] = dict,
    storage: StorageHealth | None = None,
) -> Route:
    """The route; ``gateway`` gives the AI gateway, or None where this build has none;
    ``tenancy`` whether workers are walled off from the platform's state (``trusted_workers``:
    the operator ran them unwalled on purpose, which a monitor should be able to see)."""

    async def health(request: Request) -> Response:
        served = gateway()
        models = [] if served is None else [_model(row) for row in served.pool.status()]
        stored = (storage or StorageHealth()).to_dict()
        status = "degraded" if stored["failures"] else "ok"
        return JSONResponse({"status": status, **tenancy(), "storage": stored, "models": models})

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
