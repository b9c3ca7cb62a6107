"""Where ``ember dev`` keeps a project's local state (KV and the rest) unless ``--persist-to``
names another directory. Its own module so that ``ember kv ... --local`` finds the same file
without importing the dev server (router, supervisor, AI gateway: ~0.4 CPU-s per command)."""

from __future__ import annotations

from pathlib import Path

STATE_DIR = Path(".ember") / "state"
