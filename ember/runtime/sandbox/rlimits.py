"""L3: resource limits, set soft = hard so the worker cannot raise them again.

Traps measured in isolation.md §2.1: ``RLIMIT_AS`` counts thread stacks and malloc arenas, so
memory is bounded with ``RLIMIT_DATA``; ``RLIMIT_NPROC`` counts every process of the real uid on
the host and ignores root, so it is set only with a per-deployment uid; ``RLIMIT_CPU`` is
cumulative whole seconds, so it is only a lifetime backstop (per-request CPU is the supervisor's).
"""

from __future__ import annotations

import dataclasses
import resource

from ember.runtime.sandbox.errors import SandboxError
from ember.runtime.sandbox.spec import SandboxSpec


@dataclasses.dataclass(frozen=True)
class Limits:
    values: tuple[tuple[int, int, int], ...]  # (resource, soft, hard)


def limits_for(spec: SandboxSpec, *, per_deployment_uid: bool) -> Limits:
    values = [
        (resource.RLIMIT_DATA, spec.memory_limit, spec.memory_limit),
        (resource.RLIMIT_NOFILE, spec.nofile, spec.nofile),
        (resource.RLIMIT_FSIZE, spec.fsize, spec.fsize),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_MEMLOCK, 0, 0),
        # soft = hard: SIGKILL at the limit. A soft limit's SIGXCPU would be ignored by the
        # worker as pid 1 of its namespace (init ignores default-action signals) or caught by
        # user code.
        (resource.RLIMIT_CPU, spec.cpu_backstop_s, spec.cpu_backstop_s),
    ]
    if per_deployment_uid:
        values.append((resource.RLIMIT_NPROC, spec.nproc, spec.nproc))
    return Limits(tuple(values))


def data_in_use() -> int:
    """This process's VmData in bytes (a forked child starts with its parent's)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def check_headroom(spec: SandboxSpec) -> None:
    """memory_limit is absolute and counts what the forked child already holds: refuse a limit
    the process is already over (every allocation would fail, far from the cause)."""
    used = data_in_use()
    if used >= spec.memory_limit:
        raise SandboxError(
            "rlimits",
            f"the process already uses {used >> 20} MiB of data, at or above memory_limit "
            f"{spec.memory_limit >> 20} MiB (it counts the zygote's memory the child inherited)",
        )


def apply(limits: Limits) -> None:
    for which, soft, hard in limits.values:
        _, current_hard = resource.getrlimit(which)
        # Never raise a limit the caller already lowered (that would need privilege anyway).
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
        soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))
