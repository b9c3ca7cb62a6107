"""The model server's side of the compile worker (compile_worker.py): one process, one job at a
time, each job bounded, the process restarted after a crash or a job past its limit.

- Queue: a job waits for the worker behind those before it (a FIFO lock; the caller is a request's
  intake thread or the grammar builder's, never the event loop) at most ``queue_seconds``,
  then fails with ``CompileWorkerBusy`` (503). Waiting on the lock and on the pipe releases
  the GIL: the engine's step thread runs on meanwhile.
- Limit: a job not answered within ``job_seconds`` is a 400 naming the pattern's field
  (``CompileTimeLimit``, a kind of ``AutomatonBudgetExceeded``, so that no lenient schema
  compile takes it for a keyword to ignore: review39); the worker is killed, and the next
  job starts a new one. A job carries the request's remaining budget: the worker stops
  building past it (``{"over": work}``, raised here as regex_nfa's ``AutomatonWorkExceeded``).
- A worker that dies mid-job (killed, out of memory) or answers what cannot be read (a
  malformed frame or automaton) fails that job with ``CompileWorkerFailed`` (503) at once,
  never a hang nor a 500; the next job starts a new worker.
- Size: a job is UTF-8 JSON; one past the worker's ``MAX_FRAME`` is refused before it is sent
  (``CompileJobTooLarge``, a 400 naming the pattern's field: the same request would fail
  every time, so a 503 "retry" was wrong, review41).
- Address space: the worker runs under ``RLIMIT_AS`` = ``address_space_bytes``.
- Stop: ``stop`` closes the worker's stdin (it exits) and kills it if it lingers; a server that
  dies closes that pipe too, so no worker outlives its server by more than its current job.
  A stopped worker stays stopped: a job that comes after (a thread that took the worker
  before the cache detached it) is refused with ``CompileWorkerStopped``, never a new
  process that would outlive the detach (review39).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import ember
from ember.errors import BackendError, ProtocolError
from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.automaton_wire import decode_automaton, decode_regex_error
from ember.models.constrain.compile_worker import (
    HEADER,
    MAX_FRAME,
    READY,
    frame,
    wire_bytes,
    wire_value,
)
from ember.models.constrain.fifo_lock import FifoLock
from ember.models.constrain.regex_nfa import RegexAutomaton
from ember.models.constrain.regex_work import AutomatonWorkExceeded

# Set to 1 to compile in the server's own process (no worker): the slow reference path.
IN_PROCESS_ENV = "EMBER_COMPILE_IN_PROCESS"


@dataclass(frozen=True)
class CompileLimits:
    job_seconds: float = 10.0  # the largest pattern within the bounds takes ~0.3 s here
    queue_seconds: float = 30.0
    start_seconds: float = 30.0  # the worker's imports, before its first job
    address_space_bytes: int = 2 * 2**30


class CompileWorkerFailed(BackendError):
    """The compile worker died or broke the protocol mid-job (a 503: retry)."""


class CompileWorkerBusy(CompileWorkerFailed):
    """A job waited past ``queue_seconds`` for the worker (a 503: retry)."""


class CompileWorkerStopped(CompileWorkerFailed):
    """A job asked of a worker after its ``stop`` (the cache builds it in process instead)."""


class CompileTimeLimit(AutomatonBudgetExceeded):
    """A pattern took the worker past ``job_seconds``: the request's 400, never a keyword that
    a lenient compile ignores (it would weaken the constraint, review39)."""


class CompileJobTooLarge(AutomatonBudgetExceeded):
    """A pattern whose job is past the worker's ``MAX_FRAME``: the request's 400, refused before
    it is sent (and, as a budget's refusal, never a keyword a lenient compile ignores)."""


def in_process_wanted() -> bool:
    return os.environ.get(IN_PROCESS_ENV, "") == "1"


class CompileWorker:
    """One compile worker process, started at the first job (see the module docstring)."""

    def __init__(self, limits: CompileLimits | None = None) -> None:
        self.limits = limits or CompileLimits()
        self._lock = FifoLock()  # jobs in arrival order: none loses every race to a 503
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0  # worker processes started: more than one after a crash or a limit
        self.in_flight = threading.Event()  # set while a job is on the worker (tests watch it)
        self._stopped = False  # set by ``stop``, under the lock: no process is started after

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return None if proc is None else proc.pid

    def compile(
        self,
        pattern: str,
        where: str,
        *,
        search: bool,
        length: tuple[int, int | None],
        budget: int | None = None,
    ) -> RegexAutomaton:
        """``compile_regex(pattern, search=search, length=length, budget=budget)`` built by the
        worker; raises the ``RegexError`` or ``AutomatonWorkExceeded`` it would raise, or one of
        this module's errors (``CompileWorkerStopped`` after ``stop``)."""
        job = wire_bytes(
            {"pattern": pattern, "search": search, "length": list(length), "budget": budget}
        )
        if len(job) > MAX_FRAME:
            raise CompileJobTooLarge(
                where,
                f"a pattern of at most {MAX_FRAME // 2**20} MiB as JSON text (UTF-8), the "
                "schema compiler's bound on one job",
                f"one of {len(job):,} bytes",
            )
        if not self._lock.acquire(timeout=self.limits.queue_seconds):
            raise CompileWorkerBusy(
                f"the schema compiler is busy: the pattern at {where} waited "
                f"{self.limits.queue_seconds:g} s for its turn; retry later"
            )
        try:
            if self._stopped:
                raise CompileWorkerStopped(
                    f"the schema compiler's worker was stopped before the pattern at {where}"
                )
            reply = self._job(job, where)
            try:
                return self._answer(reply, where, budget)
            except ProtocolError as error:
                # Read under the lock: the worker that sent it is restarted before the next job
                # (a malformed automaton was a 500, and the worker kept: review41).
                raise self._broken(self._proc, where, str(error)) from None
        finally:
            self.in_flight.clear()
            self._lock.release()

    def _answer(self, reply: object, where: str, budget: int | None) -> RegexAutomaton:
        """The automaton in ``reply``, or the error it names; ``ProtocolError`` for a reply
        that is not one of the worker's answers."""
        if not isinstance(reply, dict):
            raise ProtocolError(f"a {type(reply).__name__}, not an object")
        if "automaton" in reply:
            return decode_automaton(reply["automaton"])
        if "refused" in reply:
            raise decode_regex_error(reply["refused"])
        over = reply.get("over")
        if type(over) is int and budget is not None and over > budget:
            raise AutomatonWorkExceeded(over, budget)
        raise CompileWorkerFailed(
            f"the schema compiler failed on the pattern at {where}: {reply.get('failed')}"
        )

    def stop(self) -> None:
        """End the process for good: later jobs are refused (``CompileWorkerStopped``)."""
        with self._lock:
            self._stopped = True
            self._end(kill=False)

    # -- the process ---------------------------------------------------------------------------

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:
            self._end(kill=True)
        root = str(Path(ember.__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-P",  # not the server's working directory on its path (a project's ``ember/``)
                "-m",
                "ember.models.constrain.compile_worker",
                str(self.limits.address_space_bytes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.starts += 1
        proc = self._proc
        deadline = time.monotonic() + self.limits.start_seconds
        try:
            ready = self._read(proc, HEADER.size + len(READY), deadline, "")
        except CompileTimeLimit:
            raise CompileWorkerFailed(
                f"the schema compiler's worker did not start within "
                f"{self.limits.start_seconds:g} s; retry"
            ) from None
        if ready != frame(READY):
            raise self._broken(proc, "", "not its ready frame")
        return proc

    def _end(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.close()
        except OSError:
            pass  # a dead worker's pipe
        if kill:
            proc.kill()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    def _job(self, data: bytes, where: str) -> object:
        proc = self._started()
        assert proc.stdin is not None and proc.stdout is not None
        deadline = time.monotonic() + self.limits.job_seconds
        try:
            proc.stdin.write(frame(data))
            proc.stdin.flush()
            self.in_flight.set()
            head = self._read(proc, HEADER.size, deadline, where)
            (size,) = HEADER.unpack(head)
            if size > MAX_FRAME:
                raise self._broken(proc, where, f"a {size}-byte answer")
            return wire_value(self._read(proc, size, deadline, where))
        except (BrokenPipeError, ConnectionResetError):
            raise self._died(proc, where) from None
        except (ValueError, UnicodeDecodeError) as error:
            raise self._broken(proc, where, repr(error)) from None

    def _read(self, proc: subprocess.Popen[bytes], size: int, deadline: float, where: str) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        out = bytearray()
        while len(out) < size:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._end(kill=True)
                raise CompileTimeLimit(
                    where,
                    f"a pattern the schema compiler builds within {self.limits.job_seconds:g} s "
                    "(the compile worker was stopped)",
                    f"still compiling after {self.limits.job_seconds:g} s",
                )
            chunk = os.read(fd, size - len(out))
            if not chunk:
                raise self._died(proc, where)
            out += chunk
        return bytes(out)

    def _died(self, proc: subprocess.Popen[bytes], where: str) -> CompileWorkerFailed:
        self._end(kill=True)
        code = proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        doing = f"while compiling the pattern at {where}" if where else "as it started"
        return CompileWorkerFailed(
            f"the schema compiler's worker process ended ({how}) {doing}; the next request "
            "starts a new one: retry"
        )

    def _broken(
        self, proc: subprocess.Popen[bytes] | None, where: str, what: str
    ) -> CompileWorkerFailed:
        self._end(kill=True)
        return CompileWorkerFailed(
            f"the schema compiler's worker sent a malformed answer ({what}) for the pattern at "
            f"{where}; it was restarted: retry"
        )
