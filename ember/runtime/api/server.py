"""Run the control API alone under uvicorn (tests, benchmarks; ``ember serve`` adds the router).

``python -m ember.runtime.api.server STATE_DIR [--config ember.yaml] [--port N]
[--port-file PATH]`` binds 127.0.0.1 (port 0 = ephemeral) and writes the bound port to
``--port-file`` once listening, so a parent can find it without racing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import uvicorn

from ember.runtime.api.app import create_api_app
from ember.runtime.deployments.config import PlatformConfig, load_platform_config
from ember.runtime.deployments.plane import ControlPlane


async def serve(
    state_dir: Path, config: PlatformConfig, host: str, port: int, port_file: Path | None
) -> None:
    plane = ControlPlane(state_dir, config)
    server = uvicorn.Server(
        uvicorn.Config(
            create_api_app(plane), host=host, port=port, log_level="warning", lifespan="off"
        )
    )
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started and port_file is not None:
        bound = server.servers[0].sockets[0].getsockname()[1]
        staging = port_file.with_suffix(".tmp")
        staging.write_text(str(bound))
        os.replace(staging, port_file)
    try:
        await task
    finally:
        plane.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--config", type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    args = parser.parse_args()
    config = load_platform_config(args.config) if args.config else PlatformConfig()
    asyncio.run(serve(args.state_dir, config, args.host, args.port, args.port_file))


if __name__ == "__main__":
    main()
