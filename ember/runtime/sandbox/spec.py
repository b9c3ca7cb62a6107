"""The sandbox's typed vocabulary: layers, profiles, the spec a worker is built from, reports.

Everything here is plain data (frozen dataclasses and enums) so it can cross the zygote and the
startup-report pipe as JSON, and be tested without forking anything.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ember.errors import ConfigError
from ember.runtime.sandbox.errors import MinimumLayersMissing

MiB = 1 << 20


class Layer(enum.StrEnum):
    """One independently probed, applied and reported sandbox layer (isolation.md §6.2)."""

    HYGIENE = "hygiene"  # L0: setsid, pdeathsig, fds, env, umask, dumpable, malloc arenas
    MOUNT_NS = "mount_ns"  # L1: private tmpfs root with read-only binds, pivot_root
    PID_NS = "pid_ns"  # L1: worker is pid 1; its descendants die with it
    NET_NS = "net_ns"  # L1: no interfaces but a lone loopback, down
    IPC_UTS_NS = "ipc_uts_ns"  # L1: SysV IPC and hostname of its own
    UID = "uid"  # L2: a uid per deployment (root only)
    RLIMITS = "rlimits"  # L3
    LANDLOCK = "landlock"  # L4
    SECCOMP = "seccomp"  # L5, loaded last
    CGROUP = "cgroup"  # L6: memory, pids, cpu quota (cgroup v1 as root)


NAMESPACE_LAYERS = frozenset({Layer.MOUNT_NS, Layer.PID_NS, Layer.NET_NS, Layer.IPC_UTS_NS})
ALWAYS_AVAILABLE = frozenset({Layer.HYGIENE, Layer.RLIMITS})


class Mode(enum.StrEnum):
    REQUIRED = "required"  # missing on this host -> refuse to build the spec
    PREFERRED = "preferred"  # applied when the host has it
    OFF = "off"  # never applied


@dataclasses.dataclass(frozen=True)
class MinimumCheck:
    """Whether a set of layers meets the anonymous-code minimum (isolation.md §6.4)."""

    met: bool
    missing: tuple[str, ...]
    explanation: str


def check_minimum(layers: Iterable[Layer]) -> MinimumCheck:
    """Anonymous code needs (pid + net + mount namespaces) and (seccomp or Landlock), or else
    seccomp (which here always means nofork + no INET sockets) together with Landlock."""
    have = frozenset(layers)
    walls = {Layer.SECCOMP, Layer.LANDLOCK}
    primary = [layer for layer in (Layer.PID_NS, Layer.NET_NS, Layer.MOUNT_NS) if layer not in have]
    if not primary and have & walls:
        return MinimumCheck(True, (), "pid + net + mount namespaces with seccomp or Landlock")
    if walls <= have:
        return MinimumCheck(True, (), "seccomp (nofork, no INET sockets) together with Landlock")
    missing = tuple(layer.value for layer in primary)
    if not have & walls:
        missing += ("seccomp or landlock",)
    explanation = (
        f"missing {', '.join(missing)}; anonymous code needs pid + net + mount namespaces and "
        "seccomp or Landlock, or else seccomp and Landlock together"
    )
    return MinimumCheck(False, missing, explanation)


@dataclasses.dataclass(frozen=True)
class Profile:
    """Which layers a class of deployment asks for."""

    name: str
    modes: Mapping[Layer, Mode]
    enforce_minimum: bool = False

    def mode(self, layer: Layer) -> Mode:
        return self.modes.get(layer, Mode.OFF)


def _modes(required: Iterable[Layer], preferred: Iterable[Layer]) -> Mapping[Layer, Mode]:
    modes = {layer: Mode.OFF for layer in Layer}
    modes.update({layer: Mode.PREFERRED for layer in preferred})
    modes.update({layer: Mode.REQUIRED for layer in required})
    return MappingProxyType(modes)


_ALL_BUT_ALWAYS = tuple(layer for layer in Layer if layer not in ALWAYS_AVAILABLE)
# Trusted local code (`ember dev`): hygiene and limits only.
DEV = Profile("dev", _modes(ALWAYS_AVAILABLE, ()))
# Everything this host offers.
FULL = Profile("full", _modes(ALWAYS_AVAILABLE, _ALL_BUT_ALWAYS))
# Anonymous temporary deployments: everything this host offers, refused below the minimum.
ANONYMOUS = Profile("anonymous", _modes(ALWAYS_AVAILABLE, _ALL_BUT_ALWAYS), enforce_minimum=True)
PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in (DEV, FULL, ANONYMOUS)})


def parse_layers(text: str, *, source: str = "sandbox.disable") -> frozenset[Layer]:
    """Parse a comma-separated layer list from configuration (e.g. ``"landlock,seccomp"``)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    valid = {layer.value: layer for layer in Layer}
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise ConfigError(source, None, unknown[0], f"layer names among {sorted(valid)}")
    return frozenset(valid[name] for name in names)


@dataclasses.dataclass(frozen=True)
class LayerStatus:
    layer: Layer
    available: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class LayerReport:
    """What this host offers, as found by ``probe()`` in throwaway forked children."""

    statuses: tuple[LayerStatus, ...]
    euid: int
    via_user_namespace: bool
    landlock_abi: int | None
    kernel: str

    def available(self) -> frozenset[Layer]:
        return frozenset(s.layer for s in self.statuses if s.available)

    def status(self, layer: Layer) -> LayerStatus:
        for status in self.statuses:
            if status.layer is layer:
                return status
        return LayerStatus(layer, False, "not probed")

    def minimum(self) -> MinimumCheck:
        return check_minimum(self.available())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LayerReport:
        """Inverse of ``to_dict`` (the runtime probes in its zygote and gets this dict back)."""
        statuses = tuple(
            LayerStatus(Layer(name), bool(entry["available"]), str(entry["reason"]))
            for name, entry in data["layers"].items()
        )
        return cls(
            statuses=statuses,
            euid=int(data["euid"]),
            via_user_namespace=bool(data["via_user_namespace"]),
            landlock_abi=data["landlock_abi"],
            kernel=str(data["kernel"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "euid": self.euid,
            "via_user_namespace": self.via_user_namespace,
            "landlock_abi": self.landlock_abi,
            "kernel": self.kernel,
            "layers": {
                s.layer.value: {"available": s.available, "reason": s.reason} for s in self.statuses
            },
            "anonymous_minimum": dataclasses.asdict(self.minimum()),
        }


def resolve_layers(
    profile: Profile,
    report: LayerReport,
    *,
    disabled: frozenset[Layer] = frozenset(),
    uid: int | None = None,
) -> frozenset[Layer]:
    """The exact layers to apply for ``profile`` on this host, with ``disabled`` forced off.

    Raises ``MinimumLayersMissing`` when a required layer is missing, or when the profile
    enforces the anonymous minimum and the remaining layers do not meet it (fail closed).
    """
    chosen: set[Layer] = set()
    for layer in Layer:
        mode = profile.mode(layer)
        if mode is Mode.OFF or (layer in disabled and layer not in ALWAYS_AVAILABLE):
            continue
        status = report.status(layer)
        usable = status.available and not (layer is Layer.UID and uid is None)
        if usable:
            chosen.add(layer)
        elif mode is Mode.REQUIRED:
            reason = "no uid given" if status.available else status.reason
            raise MinimumLayersMissing(profile.name, (layer.value,), f"{layer.value}: {reason}")
    if profile.enforce_minimum:
        check = check_minimum(chosen)
        if not check.met:
            raise MinimumLayersMissing(profile.name, check.missing, check.explanation)
    return frozenset(chosen)


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or value < minimum:
        raise ConfigError("SandboxSpec", name, value, f"an integer >= {minimum}")


@dataclasses.dataclass(frozen=True)
class SandboxSpec:
    """Everything ``enter()`` needs to sandbox one worker of one deployment.

    ``layers`` is the exact set applied (build it with ``resolve_layers`` or ``for_profile``);
    any of them failing stops the worker before user code runs. Paths are host paths.
    """

    deployment_id: str
    code_dir: Path
    layers: frozenset[Layer] = ALWAYS_AVAILABLE
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    extra_ro_paths: tuple[Path, ...] = ()
    temp_size: int = 16 * MiB  # tmpfs at /tmp inside the mount namespace
    host_temp_dir: Path | None = None  # writable dir when there is no mount namespace
    uid: int | None = None  # pool uid for this deployment (UID layer, root only)
    gid: int | None = None  # defaults to uid
    # RLIMIT_DATA, absolute: it includes the data the forked child already holds (a zygote's
    # ~20-40 MiB); enter refuses a limit the child is already over. Also the cgroup limit.
    memory_limit: int = 256 * MiB
    nofile: int = 256
    nproc: int = 32  # RLIMIT_NPROC (only with the UID layer) and cgroup pids.max
    fsize: int = 8 * MiB
    cpu_backstop_s: int = 60  # lifetime RLIMIT_CPU; per-request CPU is the supervisor's job
    cpu_quota: float | None = 1.0  # cgroup CPU quota in cores
    # With cgroups: the shared cpu groups, outermost first, the worker's own nests in (its
    # account's; all temporary accounts' around it), so contended CPU is shared between
    # accounts, not between their isolates (cgroup.py). Empty: a group of its own.
    cpu_nest: tuple[str, ...] = ()
    require_minimum: bool = False  # re-check the anonymous minimum in enter() (fail closed)
    profile_name: str = "custom"
    hostname: str = "ember"

    def __post_init__(self) -> None:
        if not self.deployment_id or "\0" in self.deployment_id:
            raise ConfigError("SandboxSpec", "deployment_id", self.deployment_id, "a non-empty id")
        if not Path(self.code_dir).is_absolute():
            raise ConfigError("SandboxSpec", "code_dir", str(self.code_dir), "an absolute path")
        for extra in self.extra_ro_paths:
            if not Path(extra).is_absolute():
                raise ConfigError("SandboxSpec", "extra_ro_paths", str(extra), "absolute paths")
        _positive("temp_size", self.temp_size, MiB)
        _positive("memory_limit", self.memory_limit, 16 * MiB)
        _positive("nofile", self.nofile, 16)
        _positive("nproc", self.nproc, 2)
        _positive("fsize", self.fsize, 4096)
        _positive("cpu_backstop_s", self.cpu_backstop_s)
        if isinstance(self.cpu_nest, str):
            raise ConfigError("SandboxSpec", "cpu_nest", self.cpu_nest, "a sequence of names")
        for part in self.cpu_nest:
            if not isinstance(part, str) or not part or "\0" in part:
                raise ConfigError("SandboxSpec", "cpu_nest", part, "non-empty names")
        object.__setattr__(self, "cpu_nest", tuple(self.cpu_nest))
        if self.uid is not None:
            _positive("uid", self.uid)
        if self.gid is not None:
            _positive("gid", self.gid)
        if Layer.UID in self.layers and self.uid is None:
            raise ConfigError("SandboxSpec", "uid", None, "a pool uid when the uid layer is on")
        bad_env = [k for k in self.env if not k or "=" in k or "\0" in k]
        if bad_env:
            raise ConfigError("SandboxSpec", "env", bad_env[0], "names without '=' or NUL")
        object.__setattr__(self, "layers", frozenset(Layer(x) for x in self.layers))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "code_dir", Path(self.code_dir))
        object.__setattr__(self, "extra_ro_paths", tuple(Path(p) for p in self.extra_ro_paths))

    @classmethod
    def for_profile(
        cls,
        profile: Profile,
        report: LayerReport,
        *,
        disabled: frozenset[Layer] = frozenset(),
        **fields: Any,
    ) -> SandboxSpec:
        """A spec with the layers ``profile`` gets on this host (raises MinimumLayersMissing)."""
        layers = resolve_layers(profile, report, disabled=disabled, uid=fields.get("uid"))
        return cls(
            layers=layers,
            require_minimum=profile.enforce_minimum,
            profile_name=profile.name,
            **fields,
        )

    def to_wire(self) -> dict[str, Any]:
        """A msgpack/JSON-friendly dict (supervisor -> zygote); ``from_wire`` inverts it."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["layers"] = sorted(layer.value for layer in self.layers)
        data["env"] = dict(self.env)
        data["code_dir"] = str(self.code_dir)
        data["extra_ro_paths"] = [str(p) for p in self.extra_ro_paths]
        data["host_temp_dir"] = None if self.host_temp_dir is None else str(self.host_temp_dir)
        return data

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> SandboxSpec:
        """Rebuild a spec from ``to_wire`` output; unknown keys and bad values are refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(
                "SandboxSpec", unknown[0], data[unknown[0]], f"one of {sorted(names)}"
            )
        fields = dict(data)
        try:
            fields["layers"] = frozenset(Layer(x) for x in fields.get("layers", ()))
        except ValueError as exc:
            raise ConfigError("SandboxSpec", "layers", fields.get("layers"), "layer names") from exc
        fields["extra_ro_paths"] = tuple(Path(p) for p in fields.get("extra_ro_paths", ()))
        if fields.get("host_temp_dir") is not None:
            fields["host_temp_dir"] = Path(fields["host_temp_dir"])
        return cls(**fields)

    @property
    def effective_gid(self) -> int | None:
        return self.gid if self.gid is not None else self.uid

    @property
    def has_monitor(self) -> bool:
        """A monitor process exists when the worker is pid 1 or a cgroup must be cleaned up."""
        return bool(self.layers & {Layer.PID_NS, Layer.CGROUP})

    def needs_user_namespace(self) -> bool:
        return bool(self.layers & NAMESPACE_LAYERS) and os.geteuid() != 0


@dataclasses.dataclass(frozen=True)
class AppliedLayers:
    """What ``enter()`` applied, as seen from inside the worker (also sent in the ready report)."""

    layers: frozenset[Layer]
    profile_name: str
    landlock_abi: int | None
    host_pid: int  # the worker's pid as the caller's /proc saw it (the supervisor's view)
    uid: int
    gid: int
    code_dir: str  # where the deployment's code is, inside the sandbox
    temp_dir: str | None  # the writable scratch dir inside, if any
    root_entries: tuple[str, ...] = ()  # top-level names of "/" when there is a private root
    seccomp_skipped: tuple[str, ...] = ()  # deny-list syscalls this kernel/libseccomp lacks

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["layers"] = sorted(layer.value for layer in self.layers)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AppliedLayers:
        return cls(
            layers=frozenset(Layer(x) for x in data["layers"]),
            profile_name=str(data["profile_name"]),
            landlock_abi=data["landlock_abi"],
            host_pid=int(data["host_pid"]),
            uid=int(data["uid"]),
            gid=int(data["gid"]),
            code_dir=str(data["code_dir"]),
            temp_dir=data["temp_dir"],
            root_entries=tuple(data.get("root_entries", ())),
            seccomp_skipped=tuple(data.get("seccomp_skipped", ())),
        )
