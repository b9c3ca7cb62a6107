"""Python Workers' ``workers.wsgi`` (the same module as the top-level ``wsgi``)."""

from ember.runtime.isolate.wsgi_bridge import build_environ, entrypoint, fetch  # noqa: F401
