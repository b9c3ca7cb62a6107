"""A FastAPI app served by a Python Worker, written as Cloudflare's docs write it: the
platform's `asgi` module runs the app, and `request.scope["env"]` (or `env=asgi.env`) holds the
bindings. Runs unchanged under `ember dev` and on Workers (with `fastapi` in pyproject.toml)."""

import asgi
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from workers import WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await asgi.fetch(app, request.js_object, self.env)


app = FastAPI(title="notes")


class Note(BaseModel):
    title: str = Field(min_length=1, max_length=100)
    body: str = ""
    tags: list[str] = []


@app.get("/")
async def root(request: Request):
    return {"message": request.scope["env"].GREETING}


@app.put("/notes/{name}", status_code=201)
async def put_note(name: str, note: Note, env=asgi.env):
    await env.NOTES.put(name, note.model_dump_json())
    return {"stored": name}


@app.get("/notes/{name}")
async def get_note(name: str, env=asgi.env) -> Note:
    stored = await env.NOTES.get(name)
    if stored is None:
        raise HTTPException(status_code=404, detail=f"no note named {name!r}")
    return Note.model_validate_json(stored)


@app.get("/notes")
async def list_notes(env=asgi.env):
    listed = await env.NOTES.list()
    return {"names": [key.name for key in listed.keys]}


@app.get("/count")
async def count(to: int = 3):
    async def numbers():
        for n in range(1, to + 1):
            yield f"data: {n}\n\n"

    return StreamingResponse(numbers(), media_type="text/event-stream")
