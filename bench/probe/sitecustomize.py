"""Timestamps for ``bench/ai_burst_probe.py``, loaded by the processes it starts (on PYTHONPATH).

Only when ``EMBER_PROBE_LOG`` names a file, and only in ``ember models serve``: wraps
``AsyncEngine.expect`` (a request announced: its route was entered), the engine thread's
submission of each request, and ``LLMEngine.step`` (start, end, thread CPU, running and waiting
requests, and how many got their first token in it), and each garbage collection (start, end,
generation). One line per event, CLOCK_MONOTONIC, the clock the probe's client reads. ember
itself is not changed; this is a bench-only seam.
"""

from __future__ import annotations

import gc
import os
import sys
import time

_PATH = os.environ.get("EMBER_PROBE_LOG")

if _PATH and "models" in sys.argv and "serve" in sys.argv:
    from ember.models.engine import async_engine, llm_engine

    _fd = os.open(_PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _log(*parts: object) -> None:
        os.write(_fd, (" ".join(str(p) for p in parts) + "\n").encode())

    _expect = async_engine.AsyncEngine.expect
    _apply = async_engine.AsyncEngine._apply
    _step = llm_engine.LLMEngine.step

    def expect(self, request_id):  # noqa: ANN001, ANN202
        _log("expect", time.monotonic(), request_id)
        return _expect(self, request_id)

    def apply(self, command):  # noqa: ANN001, ANN202
        if isinstance(command, async_engine._Add):
            _log("add", time.monotonic(), command.request_id)
        return _apply(self, command)

    def step(self):  # noqa: ANN001, ANN202
        scheduler = self.scheduler
        running, waiting = len(scheduler.running), len(scheduler.waiting)
        started, cpu = time.monotonic(), time.thread_time()
        outputs = _step(self)
        firsts = sum(1 for out in outputs or () if out.usage.completion_tokens == 1)
        _log("step", started, time.monotonic(), time.thread_time() - cpu, running, waiting, firsts)
        return outputs

    _gc_started = [0.0]

    def collected(phase, info):  # noqa: ANN001, ANN202 - gc.callbacks' signature
        if phase == "start":
            _gc_started[0] = time.monotonic()
        else:
            _log("gc", _gc_started[0], time.monotonic(), info["generation"])

    async_engine.AsyncEngine.expect = expect
    async_engine.AsyncEngine._apply = apply
    llm_engine.LLMEngine.step = step
    gc.callbacks.append(collected)
