"""cron: a scheduled handler. `ember dev --test-scheduled` runs it on /__scheduled?cron=...

Each run records its cron and time in KV under a key of its own (KV takes one write per second
to a key, so runs appended to one shared key would be lost when two come within a second);
GET / lists the runs so far, oldest first.
"""

import uuid

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        run = {"cron": controller.cron, "scheduled_time": controller.scheduled_time}
        # Keys list in name order: the zero-padded time sorts them oldest first.
        key = f"run:{int(controller.scheduled_time):015d}:{uuid.uuid4().hex[:8]}"
        print(f"cron {controller.cron} ran (scheduled at {int(controller.scheduled_time)})")
        ctx.wait_until(env.RUNS.put(key, "", metadata=run))

    async def fetch(self, request):
        listed = await self.env.RUNS.list(prefix="run:")
        return Response.json({"runs": [key["metadata"] for key in listed["keys"]]})
