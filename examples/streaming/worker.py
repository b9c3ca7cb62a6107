"""streaming: a response body produced as it is sent (server-sent events).

GET /events?n=5 streams n events, one every 50 ms; the client sees each as it is produced.
"""

import asyncio
from urllib.parse import parse_qs, urlsplit

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        query = parse_qs(urlsplit(request.url).query)
        count = min(int(query.get("n", ["5"])[0]), 100)

        async def events():
            for i in range(count):
                yield f'data: {{"tick": {i}}}\n\n'
                await asyncio.sleep(0.05)
            yield "data: [DONE]\n\n"

        return Response(events(), headers={"content-type": "text/event-stream"})
