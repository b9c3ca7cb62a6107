"""``env.AI.run``'s third argument (``AiOptions``) and the REST body's ``options``, validated.

Names are the platform's (camelCase); snake_case spellings are accepted too, as Python code
tends to write them. ``rejectIfBusy`` counts only here, never inside the inputs (the platform
ignores it there, and so does ember). ``prefix`` and ``extraHeaders`` become headers, never body.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ember.bindings.ai.gateway_metadata import gateway_metadata
from ember.bindings.ai.replica_headers import traced_headers
from ember.errors import InvalidModelInput
from ember.models.pool.fair import Fairness
from ember.models.pool.pool import RequestOptions

_TAG = re.compile(r"^[A-Za-z0-9:\-./@ ]{1,50}$")
MAX_TAGS = 5
MAX_CACHE_TTL = 30 * 24 * 3600
ALIASES = {
    "return_raw_response": "returnRawResponse",
    "reject_if_busy": "rejectIfBusy",
    "queue_request": "queueRequest",
    "extra_headers": "extraHeaders",
    "session_options": "sessionOptions",
    "cache_ttl": "cacheTtl",
    "skip_cache": "skipCache",
    "cache_key": "cacheKey",
    "request_timeout_ms": "requestTimeoutMs",
    "collect_log": "collectLog",
}
KNOWN = frozenset(
    {
        "returnRawResponse",
        "rejectIfBusy",
        "queueRequest",
        "extraHeaders",
        "sessionOptions",
        "gateway",
        "prefix",
        "tags",
        "signal",
        "websocket",
    }
)


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """``options.gateway``: the local response cache and a per-request timeout."""

    id: str
    cache_key: str | None = None
    cache_ttl: int | None = None  # seconds; None: do not cache
    skip_cache: bool = False
    request_timeout_ms: int | None = None
    metadata: Mapping[str, object] = field(default_factory=dict)
    collect_log: bool = True  # store the call's log (gateway_logs.py); the id is set either way


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What the gateway does with one ``run`` call besides the inputs."""

    return_raw_response: bool = False
    reject_if_busy: bool = False
    queue_request: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)  # extraHeaders (+ prefix)
    gateway: GatewayOptions | None = None
    tags: tuple[str, ...] = ()
    # Keys no part of ember reads, for the dev-console note; not part of what the options mean.
    unknown: tuple[str, ...] = field(default=(), compare=False)

    @property
    def session(self) -> str | None:
        """The ``x-session-affinity`` header, which pins a replica."""
        for name, value in self.headers.items():
            if name.lower() == "x-session-affinity":
                return value
        return None

    @property
    def timeout(self) -> float | None:
        if self.gateway is not None and self.gateway.request_timeout_ms:
            return self.gateway.request_timeout_ms / 1000
        return None

    def for_pool(
        self, request_id: str, fairness: Fairness, cache_salt: str | None = None
    ) -> RequestOptions:
        """How the pool routes the call: its session, ``rejectIfBusy``, timeout, the headers
        a replica may see (tagged with ``request_id``), whose share it takes and whose part of
        the replicas' prefix cache it may use (``cache_salt``)."""
        return RequestOptions(
            session=self.session,
            reject_if_busy=self.reject_if_busy,
            headers=traced_headers(self.headers, request_id),
            timeout=self.timeout,
            fairness=fairness,
            cache_salt=cache_salt,
        )


def _bad(path: str, expected: str, found: object) -> InvalidModelInput:
    if found is None:  # "got 'NoneType'" said nothing about the key being absent
        return InvalidModelInput(path, f"Invalid option at '{path}': expected {expected}, missing")
    shown = type(found).__name__ if not isinstance(found, str | int | float | bool) else found
    return InvalidModelInput(
        path, f"Invalid option at '{path}': expected {expected}, got {shown!r}"
    )


def _bool(options: Mapping[str, object], key: str) -> bool:
    value = options.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad(f"options.{key}", "true or false", value)
    return value


def _headers(value: object, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(path, "an object of header names to strings", value)
    headers = {}
    for name, item in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
            raise _bad(path, "header names (RFC 9110 tokens)", name)
        if not isinstance(item, str | int | float) or "\n" in str(item) or "\r" in str(item):
            raise _bad(f"{path}.{name}", "a single-line string", item)
        headers[name] = str(item)
    return headers


def _gateway(value: object) -> GatewayOptions | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _bad("options.gateway", "an object such as {id: 'my-gateway'}", value)
    gateway = {ALIASES.get(k, k): v for k, v in value.items()}
    gateway_id = gateway.get("id")
    if not isinstance(gateway_id, str) or not gateway_id:
        raise _bad("options.gateway.id", "the gateway's id (a non-empty string)", gateway_id)
    ttl = gateway.get("cacheTtl")
    if ttl is not None and (
        isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_CACHE_TTL
    ):
        raise _bad("options.gateway.cacheTtl", f"seconds from 0 to {MAX_CACHE_TTL}", ttl)
    key = gateway.get("cacheKey")
    if key is not None and (not isinstance(key, str) or not key or len(key) > 1024):
        raise _bad("options.gateway.cacheKey", "a string of 1 to 1024 characters", key)
    timeout = gateway.get("requestTimeoutMs")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1
    ):
        raise _bad("options.gateway.requestTimeoutMs", "milliseconds >= 1", timeout)
    skip = gateway.get("skipCache", False)
    if not isinstance(skip, bool):
        raise _bad("options.gateway.skipCache", "true or false", skip)
    metadata = gateway_metadata(gateway.get("metadata"), "/options/gateway/metadata")
    collect = gateway.get("collectLog", True)
    if collect is None:
        collect = True
    if not isinstance(collect, bool):
        raise _bad("options.gateway.collectLog", "true or false", collect)
    return GatewayOptions(gateway_id, key, ttl, skip, timeout, metadata, collect)


def _tags(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise _bad("options.tags", "a list of strings", value)
    tags = tuple(dict.fromkeys(value))
    if len(tags) > MAX_TAGS:
        raise _bad("options.tags", f"at most {MAX_TAGS} tags", len(tags))
    for tag in tags:
        if not _TAG.match(tag):
            raise _bad("options.tags", "letters, numbers, spaces and : - . / @, 1-50 chars", tag)
    return tags


def parse_run_options(value: object, model: str) -> RunOptions:
    """Validate ``options`` (a mapping or None); unknown keys are ignored, as the platform does,
    and listed in ``unknown`` (the gateway notes them: ``unknown_fields.py``)."""
    if value is None or (type(value) is dict and not value):
        return RunOptions()  # env.AI.run without options: the common case, ~8 us less
    if not isinstance(value, Mapping):
        raise _bad("options", "an object", value)
    options = {ALIASES.get(k, k): v for k, v in value.items()}
    if _bool(options, "websocket"):
        raise _bad("options.websocket", "false (ember does not serve WebSocket inference)", True)
    headers = {}
    session = options.get("sessionOptions")
    if isinstance(session, Mapping):
        headers.update(_headers(session.get("extraHeaders"), "options.sessionOptions.extraHeaders"))
    headers.update(_headers(options.get("extraHeaders"), "options.extraHeaders"))
    prefix = options.get("prefix")
    if prefix is not None:
        if not isinstance(prefix, str) or not prefix:
            raise _bad("options.prefix", "a non-empty string", prefix)
        headers["cf-consn-model-id"] = f"{prefix}:{model}"
    return RunOptions(
        return_raw_response=_bool(options, "returnRawResponse"),
        reject_if_busy=_bool(options, "rejectIfBusy"),
        queue_request=_bool(options, "queueRequest"),
        headers=headers,
        gateway=_gateway(options.get("gateway")),
        tags=_tags(options.get("tags")),
        unknown=tuple(str(key) for key in options if key not in KNOWN),
    )
