"""Python Workers' ``workers`` module, inside an ember isolate.

``env`` is set by the isolate before the worker's module is imported.
"""

from ember.runtime.isolate.api import Request  # noqa: F401
from ember.runtime.isolate.entrypoints import (  # noqa: F401
    DurableObject,
    WorkerEntrypoint,
    WorkflowEntrypoint,
    handler,
    wait_until,
    waitUntil,
)
from ember.runtime.isolate.formdata import File, FormData  # noqa: F401
from ember.runtime.isolate.headers import Headers  # noqa: F401
from ember.runtime.isolate.jsglobals import import_from_javascript  # noqa: F401
from ember.runtime.isolate.scope import Context  # noqa: F401
from ember.runtime.isolate.sdk_response import Response, fetch  # noqa: F401

env = None  # replaced by the isolate with the deployment's Env

from . import asgi, wsgi  # noqa: E402,F401 - `from workers import asgi, wsgi`
