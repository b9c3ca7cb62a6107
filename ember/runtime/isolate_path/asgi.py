"""Python Workers' top-level ``asgi`` module: ``await asgi.fetch(app, request, self.env)``."""

from workers.asgi import *  # noqa: F403
from workers.asgi import ASGI, __getattr__, entrypoint, fetch, websocket  # noqa: F401
