"""Run the real ``ember dev`` command as a subprocess on an ephemeral port."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class DevProcess:
    """``python -m ember dev DIR --port 0 ...``; ``url`` once it printed "Ready on"."""

    def __init__(
        self,
        project: Path,
        *args: str,
        state: Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        command = [sys.executable, "-m", "ember", "dev", str(project), "--port", "0", *args]
        if state is not None:
            command += ["--persist-to", str(state)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
        env |= environ or {}  # e.g. CLOUDFLARE_ENV
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self.wait_for_line("Ready on ", timeout=30)
        self.url = ready.split("Ready on ", 1)[1].strip()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def wait_for_line(self, text: str, timeout: float = 20) -> str:
        """The first output line (already seen or coming) that contains ``text``."""
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if text in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed; output so far:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        """Ctrl-C, as a person would; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> DevProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def until(check: Callable[[], bool], timeout: float = 15) -> None:
    """Poll ``check`` every 50 ms until it holds; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")
