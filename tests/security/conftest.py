"""Fixtures: one sandboxed platform per profile for the session, and the per-attack guard.

``platform`` is the FULL profile (everything this host offers); ``fallback_platform`` is
parametrized over profiles with layers forced off, as an operator's config (or a weaker host)
would: attacks that test a specific wall run under those too.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.isolation import SandboxPolicy
from ember.runtime.sandbox import FULL, Layer
from tests.security.platform import Guard, Platform, run_guarded

NAMESPACES = frozenset({Layer.MOUNT_NS, Layer.PID_NS, Layer.NET_NS, Layer.IPC_UTS_NS})
FALLBACKS = {
    "full": frozenset(),
    # namespaces, pool uid, rlimits, cgroup: no Landlock, no seccomp (an old kernel, no libseccomp)
    "ns-only": frozenset({Layer.LANDLOCK, Layer.SECCOMP}),
    # no namespaces (a container that forbids unshare): pool uid, rlimits, Landlock, seccomp
    "no-ns": NAMESPACES,
}


def _platform(name: str) -> Iterator[Platform]:
    # Not under pytest's 0700 temp root: without a mount namespace, a pool uid opens its code
    # by host path, so the directories above it must be searchable (isolation.check_reachable).
    base = Path(tempfile.mkdtemp(prefix=f"ember-security-{name}-"))
    base.chmod(0o711)
    policy = SandboxPolicy(default_profile=FULL, disabled=FALLBACKS[name])
    platform = Platform(base, policy, name)
    try:
        yield platform
    finally:
        platform.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def platform() -> Iterator[Platform]:
    yield from _platform("full")


@pytest.fixture(scope="session", params=list(FALLBACKS))
def fallback_platform(request: pytest.FixtureRequest, platform: Platform) -> Iterator[Platform]:
    """FULL (the session's platform), then each fallback profile."""
    if request.param == "full":
        yield platform
    else:
        yield from _platform(request.param)


@pytest.fixture
def guard(platform: Platform, request: pytest.FixtureRequest) -> Iterator[Guard]:
    yield from run_guarded(platform, request.node.name)


@pytest.fixture
def fallback_guard(fallback_platform: Platform, request: pytest.FixtureRequest) -> Iterator[Guard]:
    yield from run_guarded(fallback_platform, request.node.name)
