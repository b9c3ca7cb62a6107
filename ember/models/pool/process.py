"""A launched replica's process: start it, keep its output, stop it.

The child gets its own process group (SGLang forks scheduler processes; stopping the group stops
them all) and, on Linux, a parent-death signal, so a supervisor that dies without cleaning up
does not leave model servers behind. Its stdout and stderr are read line by line as they come:
each line goes to ``on_line`` (``ember dev`` prints loading progress from it) and the last ones
are kept, so a crash can be explained with the child's own last words.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path

from ember.models.pool.launch import LaunchCommand

KEPT_LINES = 40
_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """A pre-exec hook that asks Linux to SIGTERM the child when its parent thread exits."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved now: nothing to load after fork
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    return hook


class ReplicaProcess:
    """One child process and its output."""

    def __init__(self, command: LaunchCommand, on_line: Callable[[str], None]) -> None:
        self.command = command
        self._on_line = on_line
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    async def start(self) -> None:
        """Start the child (raises OSError if the executable cannot run)."""
        env = dict(os.environ)
        env.update(self.command.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._proc = await asyncio.create_subprocess_exec(
            *self.command.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_parent_death_signal(),
        )
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None  # set by start()
        stream = self._proc.stdout
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line longer than the stream's limit: keep its head
                raw = (await stream.read(4096)) + b"\n"
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.lines.append(line)
                self._on_line(line)

    async def wait(self) -> int:
        """Wait for the child to exit; its return code (negative: killed by that signal)."""
        assert self._proc is not None  # invariant: started
        code = await self._proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._reader), 1.0)
        return code

    def stopped(self) -> bool:
        """Whether the child is stopped (SIGSTOP, a debugger): it then makes no progress at all,
        which a probe cannot tell from a slow start while the child does not listen yet. Linux
        only (its state in /proc); elsewhere always False."""
        if self._proc is None or self._proc.returncode is not None:
            return False
        try:
            stat = Path(f"/proc/{self._proc.pid}/stat").read_text()
        except OSError:
            return False
        # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")".
        return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])

    def error_line(self) -> str | None:
        """The child's last line that reports an error (else its last line), for messages:
        ``Error: No such option '--bogus-flag'.`` rather than the usage text around it."""
        lines = list(self.lines)
        for line in reversed(lines):
            if "error" in line.lower():
                return line.strip()[-300:]
        return lines[-1].strip()[-300:] if lines else None

    def last_words(self, count: int = 3) -> str:
        """The child's last output lines, joined (for error messages)."""
        return " | ".join(list(self.lines)[-count:])

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the child's process group (ignored once it has exited)."""
        if self._proc is None or self._proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signum)

    async def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM the group, SIGKILL it after ``grace`` seconds; the return code."""
        if self._proc is None:
            return None
        if self._proc.returncode is None:
            self.signal_group(signal.SIGTERM)
            try:
                await asyncio.wait_for(self._proc.wait(), grace)
            except TimeoutError:
                self.signal_group(signal.SIGKILL)
                await self._proc.wait()
        else:
            self.signal_group(signal.SIGKILL)  # leftovers of the group, if any
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        return self._proc.returncode
