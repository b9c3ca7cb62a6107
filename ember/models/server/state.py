"""The server's state: the settings, the model once it has loaded (or why it failed), metrics.

The model loads in a background thread while uvicorn already answers: ``/health`` says 503
until ``served`` is set, and every model endpoint answers 503 (``Retry-After``) meanwhile, so a
pool that starts servers lazily can poll ``/health`` and never sends traffic to a server that is
not ready.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TextIO

from ember.models.api.responses_store import ResponseStore
from ember.models.server.loading import ServedModel, load_served_model
from ember.models.server.metrics import EngineGauges, ServerMetrics
from ember.models.server.settings import LOG_LEVELS, ServerSettings
from ember.models.server.wire import HTTPError, model_not_found

# The model name SGLang's OpenAI routes put in a request that names none (protocol.py).
SGLANG_DEFAULT_MODEL = "default"


class ServerState:
    def __init__(
        self,
        settings: ServerSettings,
        *,
        log: TextIO | None = None,
        on_load_failure: Callable[[BaseException], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.log = log if log is not None else sys.stderr
        self.on_load_failure = on_load_failure
        self.on_ready = on_ready  # called on the loading thread once the model serves
        self.metrics = ServerMetrics(settings.served_model_name or settings.model)
        self.served: ServedModel | None = None
        self.responses = ResponseStore()  # POST/GET /v1/responses (responses_routes.py)
        self.load_error: BaseException | None = None
        self.phase = "starting"
        self.started = time.monotonic()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._stall_noted = False  # the current stall's warning line is written

    # -- loading ---------------------------------------------------------------------------------

    def progress(self, message: str) -> None:
        self.phase = message
        elapsed = time.monotonic() - self.started
        print(f"ember models serve: [{elapsed:6.1f}s] {message}", file=self.log, flush=True)

    def note(self, message: str, level: str = "info") -> None:
        """A line in the server's log while it serves (``progress`` is the startup phase),
        written when ``level`` is at or above ``--log-level``."""
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.settings.log_level):
            return
        elapsed = time.monotonic() - self.started
        # The level is named from warning up, so a reader of the log (and ember's pool, which
        # passes only those on once the server is ready) can tell them from progress.
        shown = message if level in ("debug", "info") else f"{level}: {message}"
        print(f"ember models serve: [{elapsed:6.1f}s] {shown}", file=self.log, flush=True)

    def start_loading(self) -> None:
        self._thread = threading.Thread(target=self._load, name="ember-model-loader", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        self.progress(f"loading {self.settings.model}")
        try:
            served = load_served_model(self.settings, self.progress)
        except BaseException as error:  # reported, then the server stops
            self.load_error = error
            self.phase = "failed"
            self.progress(f"failed to load {self.settings.model}: {error}")
            if not isinstance(error, Exception):
                traceback.print_exc(file=self.log)
            if self.on_load_failure is not None:
                self.on_load_failure(error)
            return
        if self._closed.is_set():  # the server stopped while we were loading
            served.shutdown()
            return
        self.metrics.model_name = served.name
        served.log = self.note
        if served.decode_log is not None:
            served.decode_log.log = self.note
        if self.on_ready is not None:
            self.on_ready()
        self.served = served
        self.phase = "ready"
        kv = served.kv
        self.progress(
            f"ready: serving {served.name!r} ({served.weight_bytes / 1e6:.1f} MB of weights, "
            f"{kv.capacity_tokens:,} KV tokens, context {served.context_length}) "
            f"after {served.load_seconds:.1f}s"
        )

    def wait_loaded(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.served is not None

    def close(self) -> None:
        self._closed.set()
        if self.served is not None:
            self.served.shutdown()

    # -- requests --------------------------------------------------------------------------------

    def stall(self) -> str | None:
        """Why the served engine counts as stalled (``--health-check-timeout``), or None; the
        first time a stall is seen it is also a warning line in the log."""
        if self.served is None:
            return None
        bound = self.settings.health_check_timeout
        stall = self.served.engine.stall(bound)
        if stall is None:
            self._stall_noted = False
            return None
        reason = f"{stall.describe()} (--health-check-timeout {bound:g} s)"
        if not self._stall_noted:
            self._stall_noted = True
            self.note(f"the engine is stalled: {reason}", "warning")
        return reason

    def ready(self) -> ServedModel:
        """The model, or a 503 while it loads (500 if it failed)."""
        if self.served is not None:
            return self.served
        if self.load_error is not None:
            raise HTTPError(
                500, f"the model failed to load: {self.load_error}", type="server_error"
            )
        raise HTTPError(
            503,
            f"the model is still loading ({self.phase}); retry when /health answers 200",
            type="server_error",
            code="model_loading",
        )

    def check_model(self, served: ServedModel, name: str | None) -> None:
        # "default" is SGLang's name for the one served model: its OpenAI protocol fills a
        # left-out ``model`` with it (DEFAULT_MODEL_NAME) and its docs' clients send it. Any
        # other unknown name stays a 404, as vLLM and OpenAI answer (SGLang serves any name).
        if name is not None and name != SGLANG_DEFAULT_MODEL and name not in served.aliases:
            raise model_not_found(name)

    def gauges(self) -> EngineGauges | None:
        served = self.served
        if served is None:
            return None
        stats = served.llm.stats
        queried = stats.prefix_query_tokens
        return EngineGauges(
            running=stats.running,
            waiting=stats.waiting,
            token_usage=stats.pages_used / stats.pages_total if stats.pages_total else 0.0,
            cache_hit_rate=stats.prefix_hit_tokens / queried if queried else 0.0,
            kv_capacity_tokens=served.kv.capacity_tokens,
            used_tokens=stats.pages_used * served.kv.page_size,
            preemptions=stats.preemptions,
            integrity_failures=stats.integrity_failures,
            integrity_errors=stats.integrity_errors,
            integrity_reuse_failures=stats.integrity_reuse_failures,
            integrity_cpu_seconds=stats.integrity_cpu_seconds,
            prompt_tokens_computed=stats.prompt_tokens_computed,
            prefix_cached_tokens=stats.prefix_cached_tokens,
            cache_flushes=stats.cache_flushes,
        )
