"""kv-counter: counts visits per path in Workers KV; data survives a restart of `ember dev`.

GET /anything      -> increments and returns the count for /anything
GET /__counts      -> every counter (KV list with metadata)
DELETE /anything   -> resets the counter
A short-lived "last visit" key shows expiration_ttl (KV's minimum is 60 seconds).
"""

import json
from urllib.parse import urlsplit

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlsplit(request.url).path
        kv = self.env.COUNTS
        if path == "/__counts":
            listing = await kv.list(prefix="count:")
            counts = {
                key.name.removeprefix("count:"): key.metadata["value"] for key in listing.keys
            }
            return Response.json(counts)
        key = f"count:{path}"
        if request.method == "DELETE":
            await kv.delete(key)
            return Response("reset\n")
        count = int(await kv.get(key) or 0) + 1
        await kv.put(key, str(count), metadata={"value": count})
        await kv.put("last-visit", json.dumps({"path": path}), expiration_ttl=60)
        return Response(f"{path} has been visited {count} time(s)\n")
