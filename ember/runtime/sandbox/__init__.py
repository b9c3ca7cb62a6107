"""ember's worker sandbox: layered OS isolation for one deployment's worker process.

Public API (what the runtime calls)::

    report = probe()                                   # once at startup, in forked children
    preload()                                          # in the zygote, before forking workers
    spec = SandboxSpec.for_profile(ANONYMOUS, report, deployment_id=..., code_dir=..., uid=...)
    # in the zygote-forked child, before any user code:
    applied = enter(spec, ipc_fd, report_fd=w)          # returns in the sandboxed worker only
    # in the supervisor:
    startup = read_startup(r)   # worker_pid: watch cpu_seconds(worker_pid), SIGKILL it

See ``enter`` for which process ends up where, and ``report`` for the startup report.
"""

from __future__ import annotations

from ember.runtime.sandbox.enter import enter, preload
from ember.runtime.sandbox.errors import MinimumLayersMissing, SandboxError
from ember.runtime.sandbox.probe import probe
from ember.runtime.sandbox.report import (
    EXIT_SANDBOX_FAILED,
    SandboxStartup,
    cpu_clock_id,
    cpu_seconds,
    kill_worker,
    read_startup,
)
from ember.runtime.sandbox.spec import (
    ANONYMOUS,
    DEV,
    FULL,
    PROFILES,
    AppliedLayers,
    Layer,
    LayerReport,
    LayerStatus,
    MinimumCheck,
    Mode,
    Profile,
    SandboxSpec,
    check_minimum,
    parse_layers,
    resolve_layers,
)

__all__ = [
    "ANONYMOUS",
    "DEV",
    "EXIT_SANDBOX_FAILED",
    "FULL",
    "PROFILES",
    "AppliedLayers",
    "Layer",
    "LayerReport",
    "LayerStatus",
    "MinimumCheck",
    "MinimumLayersMissing",
    "Mode",
    "Profile",
    "SandboxError",
    "SandboxSpec",
    "SandboxStartup",
    "check_minimum",
    "cpu_clock_id",
    "cpu_seconds",
    "enter",
    "kill_worker",
    "parse_layers",
    "preload",
    "probe",
    "read_startup",
    "resolve_layers",
]
