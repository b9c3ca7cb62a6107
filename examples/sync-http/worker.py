"""sync-http: the blocking HTTP clients people reach for first, inside a worker.

`requests`, `urllib3` and `httpx.Client` work as on Cloudflare's Python Workers: each request is
a subrequest the runtime makes for the worker (counted against `limits.subrequests`, checked
against the network policy), and the handler waits for its answer. Errors are the library's
own (`requests.ConnectionError`, `httpx.ConnectError`...). `urllib.request` is not supported,
as on the platform. Run `ember dev examples/sync-http`, then open http://127.0.0.1:8787/sync.
"""

import httpx
import requests
import urllib3
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        target = self.env.UPSTREAM
        if request.url.rstrip("/").endswith("/async"):
            async with httpx.AsyncClient() as client:  # the non-blocking way: awaits fetch
                answer = await client.get(target)
            return Response.json([summary("httpx.AsyncClient", answer.status_code, answer.text)])
        return Response.json(self.fetch_sync(target))

    def fetch_sync(self, target):
        results = []
        try:
            answer = requests.get(target, timeout=10)
            results.append(summary("requests", answer.status_code, answer.text))
        except requests.RequestException as exc:
            results.append({"client": "requests", "error": str(exc)})

        pool = urllib3.PoolManager()
        answer = pool.request("GET", target, timeout=10.0)
        results.append(summary("urllib3", answer.status, answer.data.decode()))

        with httpx.Client(timeout=10.0) as client:
            answer = client.get(target)
        results.append(summary("httpx.Client", answer.status_code, answer.text))
        return results


def summary(client, status, text):
    return {"client": client, "status": status, "length": len(text), "start": text[:40]}
