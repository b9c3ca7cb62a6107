"""The binding contract: how a binding type is declared, and the two halves of every binding.

A binding type (``BindingType``) is four things, and adding one never edits ``ember/runtime``:

- ``parse``: its config section (``kv_namespaces``, ``ai``, ...) -> typed ``BindingSpec`` values,
  raising ``ConfigError`` that names the file and key;
- ``client``: built *inside the isolate* from a spec and a ``BindingChannel``; it holds no state,
  no secrets beyond its own, never imports torch, and reaches the supervisor only by calls on the
  channel (the isolate's own socket; the connection is the capability);
- ``service``: built *in the supervisor*, one per deployment and binding (per-deployment scoping),
  from the spec and a ``ServiceHost``; it owns the state and answers calls, with either a value or
  a ``StreamReply`` (a head value plus a sequence of byte chunks, e.g. KV ``get(type="stream")``
  or server-sent events from a model);
- the registry (``ember.bindings.registry``) that maps config keys and kinds to types.

Cancellation runs both ways: a call whose awaiting task is cancelled in the isolate is cancelled
at the service (its coroutine or stream generator sees ``CancelledError``), and when a request
ends or its client goes away the supervisor cancels that request's outstanding calls itself.

    isolate:     env.KV.get("k") -> client -> BindingChannel.call("KV", "get", [...])
                   == CALL frame on the isolate's socket ==>
    supervisor:  services["KV"].call("get", [...], CallContext) -> value | StreamReply
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ember.config import ConfigSection
from ember.errors import BindingError

T = TypeVar("T")
# Option values travel in msgpack frames, so they stay scalar.
OptionValue = str | int | float | bool | None


class ServiceError(BindingError):
    """A service refused a call; ``kind`` and ``data`` travel to the isolate unchanged.

    Clients may turn it into the platform's own error class (the AI client raises
    ``InferenceUpstreamError`` from ``data["code"]``, for example).
    """

    def __init__(
        self, message: str, *, kind: str = "binding", data: Mapping[str, Any] | None = None
    ):
        self.kind = kind
        self.data = dict(data or {})
        super().__init__(message)


class ServiceUnavailable(ServiceError):
    """A binding's service could not be built (its store cannot be opened, say).

    Raised to the call that needed the service, with the binding's own ``kind`` so its client
    reports it like any other refusal of that binding; the next call tries to build it again.
    """

    def __init__(self, kind: str, name: str, cause: BaseException) -> None:
        self.binding = name
        self.cause = cause
        super().__init__(
            f"env.{name}: the {kind} binding is unavailable: {cause}",
            kind=kind,
            data={"status": 503, "binding": name, "unavailable": True},
        )


@dataclass(frozen=True, slots=True)
class BindingSpec:
    """One configured binding: what ``env.<name>`` is, for one deployment."""

    kind: str
    name: str
    client: str  # "module:attr" of the ClientFactory, imported inside the isolate
    options: Mapping[str, OptionValue] = field(default_factory=dict)
    # The service's alone (the supervisor's half), never sent to the isolate: what is large
    # or none of the worker's business, such as a version's compiled _redirects and _headers
    # (objects the supervisor built once, shared with the service, never serialized).
    private: Mapping[str, object] = field(default_factory=dict)

    def to_wire(self) -> list[object]:
        """A msgpack-friendly form for the isolate's init frame (``private`` stays here)."""
        return [self.kind, self.name, self.client, dict(self.options)]

    @classmethod
    def from_wire(cls, value: object) -> BindingSpec:
        """Inverse of ``to_wire`` (the supervisor is trusted; shape is still checked)."""
        if not (isinstance(value, list) and len(value) == 4):
            raise TypeError(f"bad binding spec {value!r}")
        kind, name, client, options = value
        if not all(isinstance(v, str) for v in (kind, name, client)) or not isinstance(
            options, dict
        ):
            raise TypeError(f"bad binding spec {value!r}")
        return cls(kind=kind, name=name, client=client, options=options)


class ByteStream(Protocol):
    """A stream of byte chunks the handler may iterate or hand to ``Response(...)``."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class CallReply:
    """A call's result as the isolate sees it: a value, plus a stream if the service sent one."""

    value: object
    stream: ByteStream | None = None


class BindingChannel(Protocol):
    """The isolate's way to reach its binding services (implemented by ``ember.runtime``)."""

    async def call(
        self,
        binding: str,
        method: str,
        args: list[object],
        *,
        upload: bytes | AsyncIterable[bytes] | None = None,
    ) -> CallReply:
        """Call ``method`` on this deployment's service named ``binding``.

        ``upload`` sends a body too large for one frame (a KV value up to 25 MiB). Raises
        ``ServiceError`` (or a ``BindingError``/``LimitExceeded``) with the service's message.
        """
        ...


ClientFactory = Callable[[BindingSpec, BindingChannel], object]


@dataclass(frozen=True, slots=True)
class StreamReply:
    """A service's streamed answer: ``head`` first, then ``chunks`` as they are produced.
    ``length``: how many bytes the chunks hold in all, when the service knows (an upstream's
    Content-Length); a reply handed back unread as the response is then sent with it."""

    head: object
    chunks: AsyncIterator[bytes]
    length: int | None = None


class CallContext(Protocol):
    """What a service knows about one call (supervisor side)."""

    @property
    def deployment_id(self) -> str: ...

    @property
    def request_id(self) -> int: ...

    @property
    def upload(self) -> AsyncIterator[bytes] | None:
        """The call's uploaded body, if the client sent one."""
        ...

    @property
    def loops_left(self) -> int:
        """The Worker invocations the request's subrequests may still cause (the value of the
        ``cf-ew-via`` header they carry: the loop limit, ``ember/runtime/worker_loops.py``)."""
        ...

    @property
    def root_path(self) -> str:
        """The path prefix the call's request came by (``ember serve``'s shared
        ``/w/<account>/<worker>``; "" otherwise): the worker sees the path after it."""
        ...

    def count(self, counter: str) -> int:
        """Add one to a per-request counter (e.g. KV operations) and return its new value."""
        ...

    def note(self, level: str, message: str) -> None:
        """Tell the worker's author something about this call (ember serve): a log line of the
        request's invocation (what ``ember tail`` shows) and the operator's log, naming the
        worker and account."""
        ...


class ServiceHost(Protocol):
    """What the supervisor offers a service: its deployment, a state directory, shared objects."""

    @property
    def deployment_id(self) -> str: ...

    @property
    def state_dir(self) -> Path: ...

    def clock(self) -> float:
        """Seconds since the epoch (injectable, so expiry is testable without sleeping)."""
        ...

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """One object per supervisor under ``key`` (a KV store, a model pool), made on first use.

        Shared objects with an ``aclose()`` or ``close()`` method are closed with the supervisor.
        """
        ...


class BindingService(ABC):
    """Supervisor side of one binding of one deployment: owns state, answers calls."""

    @abstractmethod
    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object | StreamReply:
        """Answer one call; raise ``ServiceError``/``BindingError``/``LimitExceeded`` on refusal.

        ``args`` came from an untrusted isolate: validate every element.
        """

    async def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Release per-deployment resources (shared ones are closed by the host)."""


ServiceFactory = Callable[[BindingSpec, ServiceHost], BindingService]


@dataclass(frozen=True, slots=True)
class HttpMount:
    """HTTP routes a binding type serves on the runtime's own port (``ember dev``).

    Requests whose path satisfies ``matches`` go to ``app`` instead of the worker (the AI
    binding's Workers AI REST and OpenAI-compatible APIs). ``ember serve`` mounts such apps itself.
    """

    matches: Callable[[str], bool]
    app: Callable[..., Any]  # an ASGI application


# (host, the project's specs of this type) -> the mount; called when ``ember dev`` starts and
# again on each config reload (the new mount replaces the old one).
HttpMountFactory = Callable[[ServiceHost, tuple[BindingSpec, ...]], HttpMount]


@dataclass(frozen=True, slots=True)
class BindingType:
    """A kind of binding, as the registry knows it."""

    kind: str
    config_key: str  # the top-level key in ember.yaml / wrangler.toml
    parse: Callable[[ConfigSection], tuple[BindingSpec, ...]]
    service: str | None  # "module:attr" of a ServiceFactory; None for client-only types
    description: str = ""
    http: str | None = None  # "module:attr" of an HttpMountFactory, if the type serves HTTP


def import_target(target: str) -> Any:
    """Import ``"module:attr"`` (binding clients and services are named, then loaded lazily)."""
    module_name, _, attribute = target.partition(":")
    if not attribute:
        raise ValueError(f"expected 'module:attribute', found {target!r}")
    return getattr(importlib.import_module(module_name), attribute)


def binding_name(section: ConfigSection, entry: Mapping[str, object], where: str) -> str:
    """The ``binding`` field of an entry: an identifier-like, non-empty string."""
    name = entry.get("binding")
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
        raise section.error(f"{where}.binding", name, "a binding name such as 'KV' (an identifier)")
    return name
