"""An isolate's lifecycle states, and the error of a worker that did not load (process.py's)."""

from __future__ import annotations

from enum import Enum

from ember.errors import HandlerError
from ember.runtime import limits as L


class State(Enum):
    """Lifecycle of an isolate process."""

    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    DEAD = "dead"


class WorkerLoadError(HandlerError):
    """The worker's module failed to load; carries what to show the user."""

    def __init__(
        self, error: L.PlatformError, message: str, traceback: str = "", *, transient: bool = False
    ) -> None:
        self.error = error
        self.detail = message
        self.traceback = traceback
        self.transient = transient  # not the code's fault (the zygote was down): retry later
        super().__init__(message)
