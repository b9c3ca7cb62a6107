"""ember's one exception tree.

Every error ember raises on purpose is an ``EmberError``. The split that matters to callers is
*who must act*: a ``UserError`` is caused by input (a config file, a handler, a request, a model
id) and its message says what was wrong and what was expected; an ``InternalError`` is ember's
own fault or an environment failure, and the CLI reports it as a possible bug.

    EmberError
    ├── UserError
    │   ├── ConfigError            a config file or key is malformed (file, key, found, expected)
    │   ├── HandlerError           the user's worker module failed to load or misbehaved
    │   ├── BindingError           a binding was used wrongly (bad key, value too large, ...)
    │   ├── LimitExceeded          a platform limit was hit (limit, observed)
    │   ├── AuthError              missing, wrong, expired or out-of-scope credentials
    │   ├── NotFound               a named thing does not exist (worker, version, account, ...)
    │   ├── StateTooNew            a state file a newer ember wrote (a downgrade); nothing written
    │   ├── ModelNotFound          an unknown model id or checkpoint path
    │   ├── InvalidModelInput      a model request failed validation (field named)
    │   │   └── ContextLengthExceeded  the prompt and the output asked for exceed the context
    │   └── CheckpointError        a checkpoint directory is incomplete or inconsistent
    └── InternalError
        ├── WorkerCrashed          an isolate process died or broke the protocol
        ├── ProtocolError          a malformed frame crossed a process boundary
        ├── BackendError           a model server or replica failed
        ├── KVCacheExhausted       the engine ran out of KV pages for a request
        ├── KVIntegrityError       a KV page failed its integrity check
        ├── KernelBuildError       a native kernel could not be built (the torch path is used)
        └── StorageFull            a write found no room on disk; nothing written (storage.py)

Subpackages may add leaves under these classes in their own modules, but never a second root.
Never branch on message text: branch on the class and its attributes.
"""

from __future__ import annotations

from ember.js_errors import JsException


class EmberError(Exception):
    """Root of every error ember raises on purpose."""


class UserError(EmberError):
    """Caused by input the user controls; the message says what was wrong and what was expected."""


class InternalError(EmberError):
    """ember's own failure or an environment failure; reported as a possible bug."""


class StateTooNew(UserError):
    """A state file written by a newer ember (its schema version past the one this ember
    reads): nothing is written to it; run that ember, or restore a backup from before it."""

    def __init__(self, path: object, what: str, found: int, known: int) -> None:
        super().__init__(
            f"{path}: {what} {found} was written by a newer ember (this one reads up to "
            f"{known}); nothing was changed. Run the newer ember, or restore the copy of the "
            "state directory made before upgrading (docs/serve.md: 'Back up or move "
            "the state directory')"
        )


class ConfigError(UserError):
    """A config file is malformed: names the file, the key, what was found and what was expected."""

    def __init__(
        self,
        file: str,
        key: str | None,
        found: object,
        expected: str,
        *,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.key = key
        self.found = found
        self.expected = expected
        self.hint = hint
        where = f"{file}: {key}" if key else file
        message = f"{where}: expected {expected}, found {found!r}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class HandlerError(UserError):
    """The user's worker module failed to import, has no handler, or returned something invalid."""


class BindingError(UserError, JsException):
    """A binding was called with invalid arguments (key too long, value too large, bad type...).

    Also a ``JsException`` (js_errors.py): on the platform the binding is JavaScript, and its
    failures reach Python as one."""


class LimitExceeded(UserError, JsException):
    """A platform limit was exceeded (a ``JsException`` too, like ``BindingError``)."""

    def __init__(self, limit: str, observed: object, maximum: object, message: str | None = None):
        self.limit = limit
        self.observed = observed
        self.maximum = maximum
        super().__init__(message or f"{limit} exceeded: {observed} > {maximum}")


class AuthError(UserError):
    """Credentials are missing, wrong, expired, or not allowed to touch this resource."""


class NotFound(UserError):
    """A named thing (worker, version, account, namespace, key) does not exist."""


class ModelNotFound(UserError):
    """An unknown model id or checkpoint path."""


class InvalidModelInput(UserError):
    """A model request failed validation; ``field`` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


class ContextLengthExceeded(InvalidModelInput):
    """The prompt, with the output asked for, does not fit the model's context window.
    ``code`` is OpenAI's for it, which clients (and vLLM users) match on."""

    code = "context_length_exceeded"


class CheckpointError(UserError):
    """A checkpoint directory is incomplete or inconsistent (missing file, shape mismatch...)."""


class WorkerCrashed(InternalError):
    """An isolate process died, was killed, or broke the protocol."""


class ProtocolError(InternalError):
    """A malformed frame crossed a process boundary."""


class BackendError(InternalError):
    """A model server or replica failed."""


class KVCacheExhausted(InternalError):
    """The engine ran out of KV pages for a request that cannot be preempted."""


class KVIntegrityError(InternalError):
    """A KV page failed its integrity check (corruption or cross-request reuse)."""


class KernelBuildError(InternalError):
    """A native kernel could not be compiled or loaded (ember then uses its torch path)."""
