"""``?page=&per_page=`` pagination with Cloudflare's ``result_info`` (the SDK follows pages until
one comes back short, so ignoring ``page`` would make it loop forever)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ember.runtime.api.envelope import ok, page_info
from ember.runtime.deployments.errors import InvalidRequest


def int_param(request: Request, name: str, default: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise InvalidRequest(f"query parameter {name} must be an integer from 1 to {maximum}")
    return int(raw)


def paged(request: Request, items: list[Any], max_per_page: int = 1000) -> Response:
    page = int_param(request, "page", 1, 1_000_000)
    per_page = int_param(request, "per_page", 20, max_per_page)
    chunk = items[(page - 1) * per_page : page * per_page]
    return ok(chunk, result_info=page_info(chunk, page, per_page, len(items)))
