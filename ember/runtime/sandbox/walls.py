"""Whether a set of layers keeps one tenant's worker out of the platform's state directory.

The state directory holds every account's secrets, vars, KV values and code (``platform.db``,
``kv.sqlite3``, ``accounts/``). A worker of one account must not be able to read it. Checked with
the walk's repro (a handler that walks the state directory) on a root host:

- ``mount_ns`` walls it: the worker's root is a private tmpfs with read-only binds of the system,
  the Python installation and its own code only (pivot_root); the host path is simply not there.
- ``landlock`` walls it: reads are allowed beneath those same paths only, even for uid 0.
- ``uid`` alone does not make a working platform: the pool uid cannot open the 0600 state files,
  but without a mount namespace the worker opens its own code by host path, through the 0700
  state directory, so every deployment is refused (``isolation.check_reachable``). It is no wall
  a platform can run behind, so it does not count here.

Either wall fails when the state directory lies beneath a path every worker may read (inside the
virtual environment, say): that is checked too.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path

from ember.runtime.sandbox.spec import Layer, LayerReport

WALLS = (Layer.MOUNT_NS, Layer.LANDLOCK)


@dataclasses.dataclass(frozen=True)
class WallCheck:
    """Which layers keep workers out of the state directory, and why the others do not."""

    walls: tuple[str, ...]  # the layers that do, e.g. ("mount_ns", "landlock")
    missing: tuple[str, ...]  # one "layer: why not" per wall that does not

    @property
    def met(self) -> bool:
        return bool(self.walls)

    def explanation(self) -> str:
        """One sentence: what walls the state directory, or what is missing and the fix."""
        if self.met:
            return f"kept out of the state directory by {' and '.join(self.walls)}"
        return (
            "no sandbox layer keeps a worker out of the state directory (every account's "
            f"secrets, KV and code) or other tenants' code: {'; '.join(self.missing)}. Give "
            "the platform mount namespaces (root, or unprivileged user namespaces; in Docker, "
            "a seccomp profile that allows unshare) or a kernel with Landlock (5.13+, "
            "lsm=landlock); the per-deployment uid alone cannot do it: without a mount "
            "namespace a worker reads its code through the state directory"
        )


def check_walls(
    layers: Iterable[Layer],
    report: LayerReport,
    state_dir: Path,
    readable: Iterable[str],
) -> WallCheck:
    """``layers``: those a permanent account's worker gets; ``readable``: the host paths every
    worker may read under either wall (system and runtime directories)."""
    have = frozenset(layers)
    state = os.path.realpath(state_dir)
    exposing = [p for p in readable if _beneath(state, os.path.realpath(p))]
    walls: list[str] = []
    missing: list[str] = []
    for layer in WALLS:
        if layer not in have:
            status = report.status(layer)
            missing.append(f"{layer.value}: {status.reason if not status.available else 'off'}")
        elif exposing:
            missing.append(
                f"{layer.value}: the state directory {state} lies beneath {exposing[0]}, which "
                "every worker may read"
            )
        else:
            walls.append(layer.value)
    return WallCheck(tuple(walls), tuple(missing))


def _beneath(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
