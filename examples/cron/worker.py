"""cron: a scheduled handler. `ember dev --test-scheduled` runs it on /__scheduled?cron=...

Each run records its cron and time in KV; GET / shows the runs so far.
"""

import json

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        runs = json.loads(await env.RUNS.get("runs") or "[]")
        runs.append({"cron": controller.cron, "scheduled_time": controller.scheduled_time})
        print(f"cron {controller.cron} ran ({len(runs)} runs so far)")
        ctx.wait_until(env.RUNS.put("runs", json.dumps(runs)))

    async def fetch(self, request):
        runs = json.loads(await self.env.RUNS.get("runs") or "[]")
        return Response.json({"runs": runs})
