"""Python Workers' ``workers.asgi`` (the same module as the top-level ``asgi``)."""

from ember.runtime.isolate.asgi_bridge import ASGI_VERSIONS as ASGI  # noqa: F401
from ember.runtime.isolate.asgi_bridge import (  # noqa: F401
    entrypoint,
    env_dependency,
    fetch,
    websocket,
)


def __getattr__(name):
    # `asgi.env`: FastAPI's dependency giving a path operation the bindings. Built on first use
    # so that a worker without FastAPI never imports it.
    if name == "env":
        return env_dependency()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
