"""kv-counter: counts visits per path in Workers KV; data survives a restart of `ember dev`.

GET /anything      -> increments and returns the count for /anything
GET /__counts      -> every counter (KV list with metadata)
DELETE /anything   -> resets the counter
A short-lived "last visit" key shows expiration_ttl (KV's minimum is 60 seconds).

Workers KV takes one write per second to the same key, a delete included; a faster one throws
"KV PUT failed: 429 Too Many Requests" ("KV DELETE failed: ..."; on Cloudflare and in ember, not
in Miniflare). Two visits to one path within a second write one key twice, and a reset just after
a visit deletes it within the second, so writes retry with backoff, as Cloudflare's KV docs
advise.
(Counting in KV loses concurrent visits anyway: a real counter belongs in a Durable Object.)
"""

import asyncio
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
            await with_retry(lambda: kv.delete(key))
            return Response("reset\n")
        count = int(await kv.get(key) or 0) + 1
        await with_retry(lambda: kv.put(key, str(count), metadata={"value": count}))
        last = json.dumps({"path": path})
        await with_retry(lambda: kv.put("last-visit", last, expiration_ttl=60))
        return Response(f"{path} has been visited {count} time(s)\n")


async def with_retry(write, attempts=5):
    """``await write()`` (a ``kv.put`` or ``kv.delete``), retried after 0.25, 0.5, 1, 2 s while
    the key is rate limited (429)."""
    delay = 0.25
    for attempt in range(attempts):
        try:
            return await write()
        except Exception as exc:
            if "429" not in str(exc) or attempt == attempts - 1:
                raise
            await asyncio.sleep(delay)
            delay *= 2
