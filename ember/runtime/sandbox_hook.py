"""The zygote's PrepareChild hook: ember dev's rlimits, or the sandbox for the profile asked.

Runs in the zygote process (``before_fork``, which learns only whether the child will be
sandboxed) and in each child it forks (``__call__``, with the ``ChildSpec`` the child read from
its isolate socket), never in the supervisor. A child whose ``ChildSpec.sandbox`` is empty is a
dev isolate: rlimits only, the worker is the forked process itself. Otherwise
``ChildSpec.sandbox`` is a ``SandboxSpec`` in wire form: the child enters it
(``ember.runtime.sandbox.enter``), which in every profile but dev forks so that the worker is
pid 1 of its own pid namespace and returns only in that worker, with the deployment's code at
``/app``. The sandbox writes its startup report (host pids, the layers applied, or the stage that
failed) on ``ChildSpec.report_fd``, a pipe the supervisor reads.

The sandbox package is imported only when a sandboxed child is first asked for, so ``ember dev``
never pays for it; ``before_fork`` then warms it in the zygote once (``preload()``: libseccomp,
the compiled filter, the runtime's paths: nothing of any deployment), so that no child pays for
it either.
"""

from __future__ import annotations

import os
from typing import Any

from ember.runtime.child import ChildSpec, PreparedChild, prepare_dev_child


class SandboxHook:
    """Callable as ``PrepareChild``; see the module docstring. Stateless: ``preload`` caches."""

    __slots__ = ()

    def before_fork(self, sandboxed: bool) -> None:
        """In the zygote: warm the sandbox before a sandboxed child (a no-op once warm)."""
        if sandboxed:
            preload()

    def __call__(self, spec: ChildSpec) -> PreparedChild:
        """In the forked child, after ``child.hygiene``: become the worker."""
        if not spec.sandbox:
            return PreparedChild(prepare_dev_child(spec))
        from ember.runtime import sandbox

        report_fd = spec.report_fd if spec.report_fd >= 0 else None
        try:
            sandbox_spec = sandbox.SandboxSpec.from_wire(spec.sandbox)
        except Exception as exc:  # noqa: BLE001 - report why, then stop before any user code
            _report_failure(report_fd, "spec", exc)
            os._exit(sandbox.EXIT_SANDBOX_FAILED)
        applied = sandbox.enter(sandbox_spec, spec.ipc_fd, report_fd=report_fd)
        return PreparedChild(applied.host_pid, applied.code_dir)


def preload() -> None:
    """Import and warm the sandbox (the zygote calls this when sandboxed children are expected)."""
    from ember.runtime import sandbox

    sandbox.preload()


def _report_failure(report_fd: int | None, stage: str, exc: BaseException) -> None:
    if report_fd is None:
        return
    from ember.runtime.sandbox.report import write_record

    record: dict[str, Any] = {"type": "failed", "stage": stage, "error": f"{exc}"}
    try:
        write_record(report_fd, record)
    except OSError:
        pass


prepare = SandboxHook()
