"""A platform process for the fault tests: a FULL-profile Supervisor behind uvicorn.

    python -m tests.security.supervisor_main STATE_DIR PROJECTS_DIR

Deploys every project directory under PROJECTS_DIR (deployment id = directory name), routes by
the ``x-test-deployment`` header, prints ``ready <port>`` and serves until SIGTERM (then
closes the supervisor) or SIGKILL. ``GET
/__pids`` (no header) answers the zygote's pid and each isolate's worker and monitor pids.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
from pathlib import Path
from typing import Any

import uvicorn

from ember.runtime.deployment import load_deployment
from ember.runtime.isolation import SandboxPolicy
from ember.runtime.router import Router
from ember.runtime.sandbox import FULL
from ember.runtime.supervisor import Supervisor

HEADER = b"x-test-deployment"


def _deployment_id(scope: dict[str, Any]) -> str | None:
    for name, value in scope["headers"]:
        if name == HEADER:
            return value.decode()
    return None


async def main(state_dir: Path, projects: Path) -> None:
    supervisor = Supervisor(state_dir=state_dir, sandbox=SandboxPolicy(default_profile=FULL))
    await supervisor.start()
    ids = []
    for root in sorted(p for p in projects.iterdir() if p.is_dir()):
        deployment = dataclasses.replace(load_deployment(root), id=root.name)
        await supervisor.deploy(deployment)
        ids.append(root.name)
    router = Router(supervisor, _deployment_id)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/__pids":
            pids: dict[str, Any] = {"zygote": supervisor.spawner.zygote_pid, "isolates": {}}
            for deployment_id in ids:
                process = supervisor.isolate(deployment_id)
                if process is not None:
                    pids["isolates"][deployment_id] = [process.pid, process.spawn_pid]
            body = json.dumps(pids).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        await router(scope, receive, send)

    # uvicorn re-raises the signal that stopped it once it has shut down; with this no-op as
    # the handler it restores, SIGTERM ends serve() and the supervisor still closes.
    signal.signal(signal.SIGTERM, lambda *_: None)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="error")
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    await serving  # until SIGTERM (uvicorn's handler), or killed
    await supervisor.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
