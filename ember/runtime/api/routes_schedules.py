"""Cron triggers of a worker, and ember's "run a scheduled event now".

``GET/PUT .../workers/scripts/{name}/schedules`` is Cloudflare's API (``wrangler triggers
deploy`` and ``wrangler deploy`` with ``[triggers] crons`` use it): the crons belong to the
worker, not to a version, and ``ember serve`` runs them on the live version in UTC.
``POST .../workers/scripts/{name}/scheduled`` with ``{"cron": "..."}`` is ember's own: it runs
one scheduled event on the live version now and says how it went (what ``wrangler dev
--test-scheduled`` offers locally, here behind the account's token).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api import serializers
from ember.runtime.api.context import caller, json_body, live_of, plane_of
from ember.runtime.api.envelope import ok
from ember.runtime.cron import WEEKDAY_NUMBERING, CronExpression
from ember.runtime.deployments.errors import InvalidRequest
from ember.runtime.deployments.records import Script

SCRIPT = "/accounts/{account_id}/workers/scripts/{name}"
MAX_SCHEDULES = 5  # Cloudflare's limit of cron triggers per worker (free plan)


def _schedules(script: Script) -> list[dict[str, Any]]:
    found = script.settings.get("schedules", [])
    return [
        {
            "cron": item["cron"],
            "created_on": serializers.iso(script.modified_on),
            "modified_on": serializers.iso(script.modified_on),
        }
        for item in found
        if isinstance(item, dict) and isinstance(item.get("cron"), str)
    ]


async def get_schedules(request: Request) -> Response:
    who = caller(request)
    script = plane_of(request).scripts.get(who.account, request.path_params["name"])
    return ok({"schedules": _schedules(script)})


async def put_schedules(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    items = body.get("schedules", body) if isinstance(body, dict) else body
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and isinstance(i.get("cron"), str) for i in items
    ):
        raise InvalidRequest('expected [{"cron": "*/5 * * * *"}, ...]')
    if len(items) > MAX_SCHEDULES:
        raise InvalidRequest(f"a worker has at most {MAX_SCHEDULES} cron triggers")
    for item in items:
        try:
            CronExpression.parse(item["cron"])
        except ValueError as exc:
            raise InvalidRequest(f"cron {item['cron']!r} is invalid: {exc}") from None
    name = request.path_params["name"]
    script = plane_of(request).scripts.patch_settings(
        who.account,
        name,
        {"schedules": [{"cron": i["cron"], "weekdays": WEEKDAY_NUMBERING} for i in items]},
    )
    await live_of(request).reconcile(who.account.id, name)
    return ok({"schedules": _schedules(script)})


async def run_scheduled(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    cron = body.get("cron") if isinstance(body, dict) else None
    if not isinstance(cron, str):
        raise InvalidRequest('expected {"cron": "<cron expression>"}')
    try:
        CronExpression.parse(cron)
    except ValueError as exc:
        raise InvalidRequest(f"cron {cron!r} is invalid: {exc}") from None
    name = request.path_params["name"]
    plane_of(request).scripts.get(who.account, name)
    return ok(await live_of(request).run_scheduled(who.account, name, cron))


ROUTES = [
    Route(SCRIPT + "/schedules", get_schedules, methods=["GET"]),
    Route(SCRIPT + "/schedules", put_schedules, methods=["PUT"]),
    Route(SCRIPT + "/scheduled", run_scheduled, methods=["POST"]),
]
