"""How the supervisor sandboxes a deployment: the operator's policy, the probe, the plan per
deployment (profile -> exact layers -> ``SandboxSpec``), pool uids, and the startup report.

    policy = SandboxPolicy(default_profile=FULL)      # the operator's choice, per Supervisor
    isolation = Isolation(policy, spawner)
    await isolation.start()                            # probes once (in the zygote) unless dev
    spec = await isolation.plan(deployment, ANONYMOUS, env)   # None for DEV; may raise
    print("\\n".join(isolation.status().lines()))      # which layers are active, and why not

A profile is what a class of deployment asks for (``DEV`` for ``ember dev``, ``FULL`` for
permanent accounts, ``ANONYMOUS`` for temporary ones, see ``ember.runtime.sandbox.spec``).
``plan`` resolves it against the probe report and the operator's forced-off layers, and raises
``MinimumLayersMissing`` (naming the missing layers) when a required layer, or the anonymous
minimum, is missing; ``allow_below_minimum`` is the operator's explicit override, and a
deployment accepted under it is reported with a warning. ``DEV`` needs no probe and runs the
runtime's own dev child (process hygiene and rlimits), exactly as ``ember dev`` always has.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ember.runtime.deployment import Deployment
from ember.runtime.limits import MIB
from ember.runtime.sandbox import (
    DEV,
    Layer,
    LayerReport,
    Mode,
    Profile,
    SandboxError,
    SandboxSpec,
    cgroup,
    check_minimum,
    resolve_layers,
)
from ember.runtime.sandbox.spec import ALWAYS_AVAILABLE
from ember.runtime.spawner import Spawner
from ember.runtime.uidpool import UidPool, UidRange

log = logging.getLogger(__name__)
DATA_HEADROOM_BYTES = 512 * MIB  # RLIMIT_DATA above the memory limit: interpreter, stacks


@dataclasses.dataclass(frozen=True)
class SandboxPolicy:
    """The operator's sandbox settings for one Supervisor."""

    default_profile: Profile = DEV  # for deploy() calls that name no profile
    disabled: frozenset[Layer] = frozenset()  # layers forced off (config, tests of fallbacks)
    allow_below_minimum: bool = False  # run anonymous code even below the minimum (warned)
    uids: UidRange | None = dataclasses.field(default_factory=UidRange)  # None: no pool uids
    temp_bytes: int = 16 * MIB  # tmpfs /tmp per worker
    nofile: int = 256
    nproc: int = 32  # processes and threads per pool uid (and cgroup pids.max)
    fsize: int = 8 * MIB


def is_dev(profile: Profile) -> bool:
    """True if the profile asks for nothing beyond hygiene and rlimits (no probe needed)."""
    return not profile.enforce_minimum and all(
        profile.mode(layer) is Mode.OFF for layer in Layer if layer not in ALWAYS_AVAILABLE
    )


@dataclasses.dataclass(frozen=True)
class SandboxStatus:
    """The startup report: what this host offers and what the policy makes of it."""

    report: LayerReport | None  # None until probed (a dev-only supervisor never probes)
    policy: SandboxPolicy
    pool_uids: bool

    def lines(self) -> list[str]:
        """Human-readable, one layer per line (``ember serve`` prints these at startup)."""
        if self.report is None:
            return ["worker sandbox: dev profile only (process hygiene and rlimits; not probed)"]
        report = self.report
        who = "root" if report.euid == 0 else f"uid {report.euid}, via a user namespace"
        out = [f"worker sandbox on Linux {report.kernel} ({who}):"]
        width = max(len(status.layer.value) for status in report.statuses)
        for status in report.statuses:
            mark = "on" if status.available else "--"
            out.append(f"  [{mark}] {status.layer.value:<{width}}  {status.reason}")
        if self.pool_uids and self.policy.uids is not None:
            last = self.policy.uids.first + self.policy.uids.count - 1
            out.append(f"  pool uids {self.policy.uids.first}..{last}, one per deployment")
        minimum = report.minimum()
        if minimum.met:
            out.append(f"anonymous deployments: accepted ({minimum.explanation})")
        elif self.policy.allow_below_minimum:
            out.append(
                f"anonymous deployments: ALLOWED BELOW MINIMUM by the operator "
                f"({minimum.explanation})"
            )
        else:
            out.append(f"anonymous deployments: refused ({minimum.explanation})")
        out.append(f"default profile: {self.policy.default_profile.name}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """For ``/health`` and JSON output."""
        return {
            "layers": None if self.report is None else self.report.to_dict(),
            "default_profile": self.policy.default_profile.name,
            "disabled": sorted(layer.value for layer in self.policy.disabled),
            "allow_below_minimum": self.policy.allow_below_minimum,
            "pool_uids": self.pool_uids,
        }


class Isolation:
    """The supervisor's sandbox planner; see the module docstring."""

    def __init__(self, policy: SandboxPolicy, spawner: Spawner) -> None:
        self.policy = policy
        self._spawner = spawner
        self.report: LayerReport | None = None
        self.pool: UidPool | None = None
        if policy.uids is not None and os.geteuid() == 0:
            self.pool = UidPool(policy.uids, spawner.kill_uid)

    async def start(self) -> None:
        """Probe now unless only dev deployments are expected (they never need it)."""
        if not is_dev(self.policy.default_profile):
            await self.ensure_report()
            for line in self.status().lines():
                log.info("%s", line)

    async def ensure_report(self) -> LayerReport:
        """The probe report, probed once in the zygote on first need.

        Also removes cgroups left by monitors that were killed before they could (a
        supervisor killed with SIGKILL takes zygote, monitors and workers with it).
        """
        if self.report is None:
            data = await self._spawner.probe(frozenset(x.value for x in self.policy.disabled))
            self.report = LayerReport.from_dict(data)
            if Layer.CGROUP in self.report.available():
                for path in cgroup.remove_stale():
                    log.info("removed a stale cgroup: %s", path)
        return self.report

    def status(self) -> SandboxStatus:
        """The startup report (see ``SandboxStatus.lines``)."""
        return SandboxStatus(self.report, self.policy, self.pool is not None)

    async def plan(
        self,
        deployment: Deployment,
        profile: Profile,
        env: Mapping[str, str],
        *,
        cpu_nest: tuple[str, ...] = (),
    ) -> SandboxSpec | None:
        """The sandbox for one deployment under ``profile``; None for a dev profile.

        Raises ``MinimumLayersMissing`` when the profile cannot be met on this host (nothing
        is left allocated then), ``LimitExceeded`` when no pool uid is free.
        """
        if is_dev(profile):
            return None
        report = await self.ensure_report()
        effective = profile
        if profile.enforce_minimum and self.policy.allow_below_minimum:
            effective = dataclasses.replace(profile, enforce_minimum=False)
        had_uid = self.pool is not None and self.pool.uid_of(deployment.id) is not None
        uid = None
        wants_uid = effective.mode(Layer.UID) is not Mode.OFF
        if self.pool is not None and wants_uid and Layer.UID not in self.policy.disabled:
            if report.status(Layer.UID).available:
                uid = await self.pool.acquire(deployment.id)
        try:
            layers = resolve_layers(effective, report, disabled=self.policy.disabled, uid=uid)
            if uid is not None and Layer.UID not in layers:
                uid = None
            code_dir = Path(deployment.code_dir).resolve()
            if uid is not None:
                if Layer.MOUNT_NS not in layers:
                    check_reachable(code_dir, uid)
                grant_code_access(code_dir, uid)
            lifetime = deployment.limits.lifetime_cpu_s
            spec = SandboxSpec(
                deployment_id=deployment.id,
                code_dir=code_dir,
                layers=layers,
                env=env,
                uid=uid,
                temp_size=self.policy.temp_bytes,
                memory_limit=deployment.limits.memory_bytes + DATA_HEADROOM_BYTES,
                nofile=self.policy.nofile,
                nproc=self.policy.nproc,
                fsize=self.policy.fsize,
                cpu_backstop_s=int(2 * lifetime) + 1,
                require_minimum=effective.enforce_minimum,
                profile_name=profile.name,
                cpu_nest=cpu_nest,
            )
        except BaseException:
            if self.pool is not None and not had_uid:
                await self.pool.release(deployment.id)
            raise
        if profile.enforce_minimum and not check_minimum(layers).met:
            log.warning(
                "deployment %s runs anonymous code below the sandbox minimum (%s): the "
                "operator allowed it",
                deployment.id,
                check_minimum(layers).explanation,
            )
        return spec

    async def release(self, deployment_id: str) -> None:
        """The deployment is gone: give its pool uid back (its leftovers are killed first)."""
        if self.pool is not None:
            await self.pool.release(deployment_id)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()


def check_reachable(code_dir: Path, uid: int) -> None:
    """Without a mount namespace the worker opens its code by its host path, as the pool uid:
    every directory above it must be searchable by others (a private root hides this)."""
    for ancestor in reversed(code_dir.parents):
        mode = ancestor.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise SandboxError(
                "uid",
                f"code directory {code_dir} is not reachable by pool uid {uid} without a mount "
                f"namespace: {ancestor} has mode {stat.S_IMODE(mode):o}; make it searchable "
                "by others (chmod o+x), or let the platform use mount namespaces",
            )


def grant_code_access(code_dir: Path, gid: int) -> None:
    """Let pool uid/gid ``gid`` read a deployment's code (``/app`` keeps host permissions).

    Entries already readable by everyone are left alone; others that we own get group ``gid``
    with read (and search) but never write. Symlinks and multiply-linked files are skipped, so
    this can never reach a file outside the code directory.
    """
    euid = os.geteuid()
    for directory, subdirs, files in os.walk(code_dir):
        for name in [None, *files]:
            path = directory if name is None else os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode) or info.st_uid != euid:
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            if not is_dir and (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1):
                continue
            everyone = stat.S_IROTH | (stat.S_IXOTH if is_dir else 0)
            if info.st_mode & everyone == everyone:
                continue
            group = stat.S_IRGRP | (stat.S_IXGRP if is_dir else 0)
            os.chown(path, -1, gid, follow_symlinks=False)
            os.chmod(path, (stat.S_IMODE(info.st_mode) | group) & ~stat.S_IWGRP)
        subdirs[:] = [d for d in subdirs if not os.path.islink(os.path.join(directory, d))]
