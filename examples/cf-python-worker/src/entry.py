from urllib.parse import urlparse

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        if url.path == "/":
            return Response.json({"version": self.env.API_VERSION, "routes": ["/notes/<name>"]})
        if url.path.startswith("/notes/"):
            name = url.path.removeprefix("/notes/")
            if request.method == "PUT":
                await self.env.NOTES.put(name, await request.text())
                return Response("stored", status=201)
            note = await self.env.NOTES.get(name)
            if note is None:
                return Response("not found", status=404)
            return Response(note, headers={"content-type": "text/plain"})
        return Response.redirect(url._replace(path="/").geturl(), 302)
