"""A real ``ember models serve`` process for tests that must see the server as a client does:
its own process, its own engine thread, nothing shared with the test but the socket."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


@dataclass
class ServedProcess:
    url: str
    process: subprocess.Popen[str]
    # Everything the server wrote to stderr after it was ready (tracebacks land here).
    log: list[str] = field(default_factory=list)


@contextlib.contextmanager
def served_process(
    checkpoint: Path, name: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[ServedProcess]:
    """Serve ``checkpoint`` as ``name`` on a free loopback port until the block ends (``env``:
    more environment for the server; its PYTHONPATH is put before the repository)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "ember", "models", "serve", str(checkpoint)]
    command += ["--port", str(port), "--served-model-name", name, "--torch-threads", "1", *args]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=_environment(env or {}),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "ready:" in line or "failed" in line:
                assert "ready:" in line, line
                break
        served = ServedProcess(f"http://127.0.0.1:{port}", process)
        # Keep draining stderr: a full pipe would block the server's logging.
        threading.Thread(target=_drain, args=(process, served.log), daemon=True).start()
        yield served
    finally:
        process.terminate()
        process.wait(30)


def _drain(process: subprocess.Popen[str], into: list[str]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        into.append(line.rstrip("\n"))


def _environment(extra: dict[str, str]) -> dict[str, str]:
    path = os.pathsep.join(p for p in (extra.get("PYTHONPATH"), str(REPO)) if p)
    return {**os.environ, **extra, "PYTHONPATH": path}
