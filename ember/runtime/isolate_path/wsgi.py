"""Python Workers' top-level ``wsgi`` module: ``await wsgi.fetch(app, request, self.env)``."""

from workers.wsgi import build_environ, fetch  # noqa: F401
