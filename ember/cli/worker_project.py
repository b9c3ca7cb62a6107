"""Read a worker project and turn it into what ``ember deploy`` uploads.

The config is read and checked as ``ember dev`` reads it (``ember.config.load_project``
without the secrets files, then ``ember.runtime.project_check``); this module takes from it
what a deploy uploads (name, main, compatibility date and flags, vars, KV and AI bindings,
crons, keep_vars, and the ``limits`` wrangler uploads: ``cpu_ms`` and ``subrequests``; ember's
other limit keys are ``ember dev``'s alone, and a deploy warns that it leaves them out). The
files uploaded are what wrangler uploads for a Python Worker, by its
module rules: the entry, the files the config's ``rules``, the ``**/*.py`` rule and wrangler's
default rules match under the module root (names relative to it), and the project's
``python_modules/`` (``ember.runtime.worker_modules``, the same list ``ember dev`` runs). Files no
rule matches, and the config files, are never uploaded. With an environment (``--env NAME``),
the keys are those ``ember.config_env`` selects for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ember.bindings.base import BindingSpec
from ember.config import LimitsConfig, ProjectConfig
from ember.config import load_project as load_config
from ember.config_assets import AssetsConfig
from ember.errors import ConfigError
from ember.runtime.deployments.multipart import Part
from ember.runtime.project_check import check_project
from ember.runtime.worker_modules import ModuleScan, WorkerModule, collect_scan

# The keys of ``limits`` an upload carries (wrangler's CfUserLimits; Cloudflare enforces them).
UPLOADED_LIMITS = ("cpu_ms", "subrequests")


@dataclass(frozen=True)
class KVBinding:
    binding: str
    id: str | None


@dataclass(frozen=True)
class WorkerProject:
    root: Path
    config_file: Path
    name: str
    main: Path  # the project's directory itself for an assets-only project (no module_files)
    module_root: Path  # module names are relative to it: base_dir, or main's directory
    compatibility_date: str | None
    compatibility_flags: tuple[str, ...]
    vars: dict[str, Any] = field(default_factory=dict)
    kv_namespaces: tuple[KVBinding, ...] = ()
    ai_binding: str | None = None
    ai_models: tuple[str, ...] = ()  # ids the ai.models section maps (ember dev only)
    crons: tuple[str, ...] | None = None  # triggers.crons; None when the config has none
    keep_vars: bool = False  # the config's keep_vars (top level only), as --keep-vars
    env: str | None = None  # the environment deployed; None: the top level
    environments: tuple[str, ...] = ()  # every environment the config defines
    warnings: tuple[str, ...] = ()
    limits: dict[str, int] = field(default_factory=dict)  # metadata.limits: cpu_ms, subrequests
    module_files: tuple[WorkerModule, ...] = ()  # what the module rules pick, entry first
    link_notes: tuple[str, ...] = ()  # folder links left out by the first-name rule
    assets: AssetsConfig | None = None  # static assets, uploaded with each version

    def modules(self) -> list[Part]:
        """The module parts, entry first, named and typed as wrangler's rules name them."""
        return [
            Part(m.name, m.name, m.content_type, m.path.read_bytes()) for m in self.module_files
        ]

    def outside_notes(self) -> list[str]:
        """A line per module whose file is outside the project (reached through a link), so
        the user sees what else an upload carries before it goes."""
        root = self.root.resolve()
        return [
            f"{m.name} is {real}, outside the project ({root}): it is uploaded too"
            for m in self.module_files
            if not (real := m.path.resolve()).is_relative_to(root)
        ]


def load_project(
    directory: Path, name_override: str | None = None, env: str | None = None
) -> WorkerProject:
    """The project in ``directory`` as environment ``env`` sees it (None or "": the top level);
    ``name_override`` (``--name``) replaces the worker's name as it is, as wrangler's does.

    Read and checked as ``ember dev`` reads it (``load_config``, then ``check_project``), minus
    dev's secrets files, so what dev refuses a deploy refuses with the same error. One rule is a
    deploy's own, as in wrangler's deploy: the worker needs a name, from the config or
    ``--name`` (dev runs a nameless one under its directory's name)."""
    name_override = name_override or None  # an empty --name names nothing
    config = load_config(directory, env=env, secrets=False, name=name_override)
    checked = check_project(config)
    if not config.named and name_override is None:
        raise ConfigError(str(config.file), "name", None, "the Worker's name (or pass --name)")
    flags = config.compatibility_flags
    if "python_workers" not in flags:
        flags = (*flags, "python_workers")  # every upload is a Python Worker
    ai = checked.bindings_of("ai")
    scan = collect_scan(config) if config.has_worker else ModuleScan((), ())
    return WorkerProject(
        root=config.root,
        config_file=config.file,
        name=config.name,
        main=config.main_path,
        module_root=config.module_root,
        compatibility_date=config.compatibility_date,
        compatibility_flags=flags,
        vars=dict(config.vars),
        kv_namespaces=tuple(_kv(spec) for spec in checked.bindings_of("kv_namespace")),
        ai_binding=ai[0].name if ai else None,
        ai_models=_ai_models(config),
        crons=config.crons if config.crons_set else None,
        keep_vars=config.keep_vars,
        env=config.env,
        environments=config.environments,
        warnings=(*checked.warnings, *_local_limits(config.file, config.limits)),
        limits=uploaded_limits(config.limits),
        module_files=scan.modules,
        link_notes=tuple(scan.dropped_notes()),
        assets=config.assets,
    )


def _ai_models(config: ProjectConfig) -> tuple[str, ...]:
    """The ids the ``ai.models`` section maps to local checkpoints (not uploaded)."""
    for section in config.binding_sections:
        if section.key == "ai" and isinstance(section.value, dict):
            models = section.value.get("models")
            if isinstance(models, dict):
                return tuple(str(model) for model in models)
    return ()


def uploaded_limits(limits: LimitsConfig) -> dict[str, int]:
    """The config's limits an upload carries, as wrangler puts them in ``metadata.limits``."""
    values = {key: getattr(limits, key) for key in UPLOADED_LIMITS}
    return {key: value for key, value in values.items() if value is not None}


def _local_limits(config_file: Path, limits: LimitsConfig) -> list[str]:
    """A warning per limit key only ``ember dev`` reads: the platform sets those itself, so the
    user does not believe a deployed worker runs under them."""
    return [
        f"{config_file.name}: limits.{f.name} applies under ember dev only (not uploaded: the "
        "platform sets its own)"
        for f in fields(limits)
        if f.name not in UPLOADED_LIMITS and getattr(limits, f.name) is not None
    ]


def _kv(spec: BindingSpec) -> KVBinding:
    """A KV binding to upload: its namespace id, or None where the config gives none (dev names
    that one after the binding; a deploy provisions a namespace for it)."""
    if spec.options.get("default_id"):
        return KVBinding(spec.name, None)
    return KVBinding(spec.name, str(spec.options["namespace_id"]))
