"""Python Workers' top-level ``wsgi`` module: ``await wsgi.fetch(app, request, self.env)``, or
``Default = wsgi.entrypoint(app)``."""

from workers.wsgi import build_environ, entrypoint, fetch  # noqa: F401
