"""hello: the smallest worker. `ember dev examples/hello`, then open http://127.0.0.1:8787."""

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.endswith("/json"):
            return Response.json({"greeting": self.env.GREETING, "method": request.method})
        return Response(f"{self.env.GREETING}, world!")
