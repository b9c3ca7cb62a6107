"""SGLang's periodic "Decode batch." line: every ``--decode-log-interval`` steps that decode, one
info line with the running and queued requests, the KV tokens in use and the generation
throughput since the last line, so that a served model is not silent after "ready".

Called on the engine thread after every step; between lines it only counts (no formatting, no
I/O), so its cost does not show next to a forward pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ember.models.engine.engine_types import EngineStats


def _silent(message: str) -> None:
    pass


class DecodeLog:
    def __init__(
        self,
        stats: EngineStats,
        page_size: int,
        interval: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stats = stats
        self.page_size = page_size
        self.interval = interval
        self.clock = clock
        self.log: Callable[[str], None] = _silent  # the server's log, once it serves
        self.steps = 0
        self.since = clock()
        self.tokens = stats.generation_tokens

    def __call__(self) -> None:
        stats = self.stats
        if not stats.running:
            return
        self.steps += 1
        if self.steps % self.interval:
            return
        now = self.clock()
        elapsed = now - self.since
        rate = (stats.generation_tokens - self.tokens) / elapsed if elapsed > 0 else 0.0
        self.since, self.tokens = now, stats.generation_tokens
        usage = stats.pages_used / stats.pages_total if stats.pages_total else 0.0
        line = (
            f"Decode batch. #running-req: {stats.running}, "
            f"#token: {stats.pages_used * self.page_size}, token usage: {usage:.2f}, "
            f"gen throughput (token/s): {rate:.2f}, #queue-req: {stats.waiting}"
        )
        try:
            self.log(line)
        except OSError:  # a closed log stream must not stop the engine loop
            pass
