"""The sandbox configurations every attack runs against, and what each must stop."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ember.runtime.sandbox import FULL, Layer, LayerReport, SandboxSpec
from ember.runtime.sandbox.spec import MiB
from tests.sandbox.conftest import data_in_use

NAMESPACES = frozenset({Layer.MOUNT_NS, Layer.PID_NS, Layer.NET_NS, Layer.IPC_UTS_NS})
BASE = frozenset({Layer.HYGIENE, Layer.RLIMITS})


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    spec: SandboxSpec
    as_uid: int | None  # simulate an unprivileged platform
    namespaces: bool
    seccomp: bool
    landlock: bool


CASE_NAMES = ("full", "ns_only", "unprivileged", "walls_only")


def make_case(
    name: str,
    report: LayerReport,
    code_dir: Path,
    pool_uid: int,
    unpriv_uid: int | None,
    scratch: Path,
    **overrides: object,
) -> Case:
    """full: every layer, root with a pool uid. ns_only: namespaces + uid + rlimits (seccomp and
    Landlock forced off). unprivileged: namespaces through a user namespace + Landlock + seccomp.
    walls_only: no namespaces, Landlock + seccomp + uid (the other anonymous minimum)."""
    fields: dict[str, object] = dict(
        deployment_id="tenant-a",
        code_dir=code_dir,
        env={"EMBER_VAR": "visible"},
        memory_limit=data_in_use() + 128 * MiB,
        nproc=16,
        temp_size=8 * MiB,
        fsize=32 * MiB,
    )
    fields.update(overrides)
    as_uid = None
    if name == "full":
        layers = set(FULL.modes) & report.available()
        needed = NAMESPACES | {Layer.UID, Layer.SECCOMP, Layer.LANDLOCK}
        fields["uid"] = pool_uid
    elif name == "ns_only":
        layers = set(BASE | NAMESPACES | {Layer.UID})
        needed = NAMESPACES | {Layer.UID}
        fields["uid"] = pool_uid
    elif name == "unprivileged":
        layers = set(BASE | NAMESPACES | {Layer.SECCOMP, Layer.LANDLOCK})
        needed = {Layer.SECCOMP, Layer.LANDLOCK}  # user namespaces are found by running it
        as_uid = unpriv_uid
    else:
        layers = set(BASE | {Layer.SECCOMP, Layer.LANDLOCK, Layer.UID})
        needed = {Layer.SECCOMP, Layer.LANDLOCK, Layer.UID}
        fields["uid"] = pool_uid
        fields["host_temp_dir"] = scratch
    missing = [layer.value for layer in needed if layer not in report.available()]
    if missing:
        pytest.skip(f"{name}: this host lacks {', '.join(sorted(missing))}")
    spec = SandboxSpec(layers=frozenset(layers), profile_name=name, **fields)  # type: ignore[arg-type]
    return Case(
        name,
        spec,
        as_uid,
        bool(layers & NAMESPACES),
        Layer.SECCOMP in layers,
        Layer.LANDLOCK in layers,
    )


def skip_if_no_userns(case: Case, error: object) -> None:
    stage = getattr(error, "stage", None)
    if case.as_uid is not None and stage in ("namespaces", "mount_ns"):
        pytest.skip(f"unprivileged user namespaces unavailable here: {error}")


def for_profile(*args: object, **kwargs: object) -> SandboxSpec:
    """``SandboxSpec.for_profile`` with a memory limit above what this test process holds.

    memory_limit is an absolute RLIMIT_DATA that counts what a forked child inherits; the real
    zygote is small, but pytest may have imported torch by now, so leave headroom above it.
    """
    kwargs.setdefault("memory_limit", data_in_use() + 256 * MiB)
    return SandboxSpec.for_profile(*args, **kwargs)  # type: ignore[arg-type]


def sandbox_spec(**kwargs: object) -> SandboxSpec:
    """``SandboxSpec(...)`` with the same memory headroom as ``for_profile`` above."""
    kwargs.setdefault("memory_limit", data_in_use() + 256 * MiB)
    return SandboxSpec(**kwargs)  # type: ignore[arg-type]
