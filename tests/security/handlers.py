"""Hostile handler sources. Each is a whole worker module: a plain GET answers "ready" (the
attacker's normal request); a request with ``x-attack`` runs ``attack(request, env)``."""

from __future__ import annotations

import textwrap

PRELUDE = """
import asyncio
import json
import os
import sys
from workers import Response


async def fetch(request, env):
    if request.headers.get("x-attack") is None:
        return Response("ready")
    return await attack(request, env)


def report(**values):
    return Response(json.dumps(values), headers={"content-type": "application/json"})


def outcome(call):
    try:
        return "ok: " + repr(call())[:200]
    except BaseException as exc:
        return type(exc).__name__ + ": " + str(exc)[:200]
"""


def handler(body: str) -> str:
    """A worker module whose ``attack`` is ``body`` (an ``async def attack`` and helpers)."""
    return PRELUDE + textwrap.dedent(body)
