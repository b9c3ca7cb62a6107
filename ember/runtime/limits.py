"""Per-request platform limits: defaults, config overrides, and the platform's error responses.

The supervisor enforces every limit itself (an isolate is never trusted to): CPU time and memory
by polling the isolate process, wall time with deadlines, subrequests by counting calls, body
sizes by counting bytes. Defaults follow Workers' Paid plan where the platform has a number
(CPU 30 s, memory 128 MB, 10,000 subrequests, startup 1 s); wall time has no platform number
while a client is connected, so ember bounds it at 5 minutes (configurable).
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.config import LimitsConfig
from ember.runtime.fields import MAX_HEADER_BYTES, MAX_HEADERS, MAX_URL

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits one deployment runs under."""

    cpu_ms: int = 30_000
    startup_cpu_ms: int = 1_000
    startup_wall_ms: int = 30_000
    wall_ms: int = 300_000
    background_ms: int = 30_000  # waitUntil work after the response, as on the platform
    memory_bytes: int = 128 * MIB
    subrequests: int = 10_000
    max_request_bytes: int = 100 * MIB
    max_response_bytes: int = 100 * MIB
    max_concurrent_calls: int = 1_000
    # CPU an isolate may use with no request in flight (a thread left burning after its
    # response) before it is replaced, so that nobody's next request is charged for it.
    idle_cpu_ms: int = 50
    # Characters of console output per second an isolate may send (``console_gate.py``;
    # ``ember serve``: 256,000); None: every line (``ember dev``, whose console is the user's).
    console_chars_per_s: int | None = None

    @property
    def lifetime_cpu_s(self) -> float:
        """CPU after which an isolate is replaced between requests (whole-isolate budget).

        At least twice the per-request limit, so the sandbox's RLIMIT_CPU backstop
        (``2 * lifetime_cpu_s + 1``) is never reached by requests within their limits.
        """
        return max(60.0, 2 * self.cpu_ms / 1000)

    @classmethod
    def from_config(cls, config: LimitsConfig, base: Limits | None = None) -> Limits:
        """``base`` (defaults if None) with the config's values where it sets them."""
        base = base or cls()
        return cls(
            cpu_ms=config.cpu_ms or base.cpu_ms,
            startup_cpu_ms=config.startup_cpu_ms or base.startup_cpu_ms,
            startup_wall_ms=base.startup_wall_ms,
            wall_ms=config.wall_ms or base.wall_ms,
            background_ms=base.background_ms,
            memory_bytes=config.memory_mb * MIB if config.memory_mb else base.memory_bytes,
            subrequests=config.subrequests or base.subrequests,
            max_request_bytes=(
                config.max_request_mb * MIB if config.max_request_mb else base.max_request_bytes
            ),
            max_response_bytes=(
                config.max_response_mb * MIB if config.max_response_mb else base.max_response_bytes
            ),
            max_concurrent_calls=base.max_concurrent_calls,
            idle_cpu_ms=base.idle_cpu_ms,
            console_chars_per_s=base.console_chars_per_s,
        )


@dataclass(frozen=True, slots=True)
class PlatformError:
    """A Workers-style error response: status, the platform's error code, message, tag."""

    status: int
    code: int | None
    message: str
    tag: str

    def body(self) -> bytes:
        """The plain-text body clients see."""
        suffix = f" (error code: {self.code})" if self.code is not None else ""
        return f"{self.message}{suffix}\n".encode()


CPU_EXCEEDED = PlatformError(503, 1102, "Worker exceeded CPU time limit.", "cpu_limit")
MEMORY_EXCEEDED = PlatformError(503, 1102, "Worker exceeded memory limit.", "memory_limit")
WALL_EXCEEDED = PlatformError(504, None, "Worker exceeded wall time limit.", "wall_limit")
STARTUP_CPU_EXCEEDED = PlatformError(
    503, 10021, "Script startup exceeded CPU time limit.", "startup_cpu_limit"
)
STARTUP_WALL_EXCEEDED = PlatformError(
    503, None, "Script startup exceeded wall time limit.", "startup_wall_limit"
)
RESPONSE_TOO_LARGE = PlatformError(
    502, None, "Worker response exceeded the size limit.", "response_too_large"
)
RESPONSE_HEADERS_TOO_LARGE = PlatformError(
    502,
    None,
    f"Worker response headers exceeded the limit ({MAX_HEADERS} headers, "
    f"{MAX_HEADER_BYTES // 1024} KiB in all).",
    "response_headers_too_large",
)
REQUEST_TOO_LARGE = PlatformError(413, None, "Request body too large.", "request_too_large")
# A request head the isolate protocol cannot carry (its decoder would refuse the frame and the
# isolate exit, with every request it serves): refused before it is sent. 16 KiB is Cloudflare's
# URL limit (414); the header count is ember's protocol bound (Cloudflare bounds only the size).
URL_TOO_LONG = PlatformError(
    414, None, f"URI Too Long: the request's URL exceeds {MAX_URL // 1024} KiB.", "url_too_long"
)
REQUEST_HEADERS_TOO_LARGE = PlatformError(
    431,
    None,
    f"Request Header Fields Too Large: at most {MAX_HEADERS} headers, "
    f"{MAX_HEADER_BYTES // 1024} KiB in all.",
    "request_headers_too_large",
)


def request_too_large(limit: int) -> PlatformError:
    """The 413 for a body past ``limit`` bytes, naming the limit (the platform's edge answers
    "413 Request Entity Too Large" past the plan's 100 MB; its docs do not say whether that MB
    is 10**6 or 2**20 bytes, so ember keeps 100 MiB and says which in the body)."""
    size = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit / MIB:.2f} MiB"
    message = f"Request body too large: the limit is {size} ({limit:,} bytes)."
    return PlatformError(413, None, message, REQUEST_TOO_LARGE.tag)


def isolate_restarted(rid: int, why: str = "ignored its cancellation") -> PlatformError:
    """What the other requests of an isolate killed because request ``rid`` ignored its
    cancellation (``cancelgrace.py``) or did not stop at its CPU limit (``watchdog.py``) get:
    the reason, not the culprit's own limit."""
    message = f"Worker restarted: request {rid} in the same isolate {why}."
    return PlatformError(503, None, message, "isolate_restarted")


# Cloudflare names the code, not the status; ember answers 508 Loop Detected (worker_loops.py).
LOOP_LIMIT = PlatformError(508, 1019, "Worker hit loop limit.", "loop_limit")
CRASHED = PlatformError(502, None, "Worker crashed.", "crashed")
NO_RESPONSE = PlatformError(502, None, "Worker finished without sending a response.", "no_response")
PROTOCOL_VIOLATION = PlatformError(
    502, None, "Worker broke the isolate protocol.", "protocol_error"
)
EXCEPTION = PlatformError(500, 1101, "Worker threw exception.", "exception")
STARTUP_FAILED = PlatformError(500, 1101, "Worker failed to start.", "startup_failed")
NO_HANDLER = PlatformError(500, 1101, "Handler does not export a fetch() function.", "no_handler")
UNAVAILABLE = PlatformError(503, None, "Worker is not available.", "unavailable")
# A request still running when the server stops (ember dev's Ctrl-C, ember serve's SIGTERM)
# past its grace: the client is told why, not just that the worker is gone.
STOPPING = PlatformError(
    503, None, "Worker is not available: the server is stopping.", "server_stopping"
)
# Killed for CPU burned while idle (a thread or task left running): no request sees it, but
# unlike the supervisor's own stops (UNAVAILABLE) the operator's log must.
IDLE_CPU_EXCEEDED = PlatformError(503, None, "Worker is not available.", "idle_cpu_limit")
ISOLATES_EXHAUSTED = PlatformError(
    503, None, "Worker could not start: the platform is at its isolate limit.", "isolates_exhausted"
)
SANDBOX_FAILED = PlatformError(503, None, "Worker sandbox could not be set up.", "sandbox_failed")
SUBREQUESTS_EXCEEDED_MESSAGE = "Too many subrequests."
