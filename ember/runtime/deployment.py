"""``Deployment``: everything the supervisor needs to run one worker, as one typed value.

``ember dev`` builds one from a project directory; ``ember serve`` builds one per deployed
version (its own code directory, an account-scoped id, namespaces rewritten to the account's).
The supervisor only ever sees this value: it never reads config files itself.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ember.bindings.base import BindingSpec
from ember.bindings.registry import BindingRegistry, default_registry
from ember.config import JSONValue, ProjectConfig, load_project
from ember.errors import ConfigError
from ember.runtime.cron import CronExpression
from ember.runtime.limits import Limits

SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "venv", "python_modules"})


@dataclass(frozen=True, slots=True)
class Deployment:
    """One worker version, ready to run."""

    id: str
    name: str
    code_dir: Path
    main: str  # relative to code_dir
    vars: Mapping[str, JSONValue] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    bindings: tuple[BindingSpec, ...] = ()
    limits: Limits = field(default_factory=Limits)
    crons: tuple[str, ...] = ()
    compatibility_date: str | None = None
    compatibility_flags: tuple[str, ...] = ()
    version: str = ""

    def init_spec(self) -> dict[str, object]:
        """What the isolate receives in its Init frame (sent over its own socket only)."""
        return {
            "deployment_id": self.id,
            "name": self.name,
            "code_dir": str(self.code_dir),
            "main": self.main,
            "vars": dict(self.vars),
            "secrets": dict(self.secrets),
            "bindings": [b.to_wire() for b in self.bindings],
            "compatibility_date": self.compatibility_date,
            "compatibility_flags": list(self.compatibility_flags),
        }

    def with_version(self, version: str) -> Deployment:
        """The same deployment labelled with another version."""
        return replace(self, version=version)


def deployment_from_project(
    config: ProjectConfig,
    *,
    deployment_id: str | None = None,
    registry: BindingRegistry | None = None,
    base_limits: Limits | None = None,
) -> Deployment:
    """Turn a parsed project into a Deployment; binding and cron errors name file and key."""
    registry = registry or default_registry()
    bindings = registry.parse(config.binding_sections)
    _check_unique_names(config, bindings)
    for index, cron in enumerate(config.crons):
        try:
            CronExpression.parse(cron)
        except ValueError as exc:
            raise ConfigError(
                str(config.file), f"triggers.crons[{index}]", cron, str(exc)
            ) from None
    return Deployment(
        id=deployment_id or config.name,
        name=config.name,
        code_dir=config.root,
        main=config.main,
        vars=dict(config.vars),
        secrets=dict(config.secrets),
        bindings=bindings,
        limits=Limits.from_config(config.limits, base_limits),
        crons=config.crons,
        compatibility_date=config.compatibility_date,
        compatibility_flags=config.compatibility_flags,
        version=source_digest(config.root),
    )


def _check_unique_names(config: ProjectConfig, bindings: tuple[BindingSpec, ...]) -> None:
    """A var or secret named like a binding would hide one of them on ``env``: refused, as
    wrangler refuses it ("KV assigned to Environment Variable and KV Namespace bindings")."""
    kinds = {spec.name: spec.kind for spec in bindings}
    for source, names, key in (
        (config.file, config.vars, "vars"),
        (config.secrets_file, config.secrets, "secrets"),
    ):
        for name in names:
            if name in kinds:
                raise ConfigError(
                    str(source),
                    f"{config.where(key)}.{name}" if key == "vars" else name,
                    name,
                    f"a name no binding uses (the {kinds[name]} binding {name} has it)",
                    hint="bindings must have unique names, so that they can all be referenced "
                    "in the worker",
                )


def load_deployment(root: Path | str, **kwargs: object) -> Deployment:
    """``load_project`` then ``deployment_from_project``."""
    return deployment_from_project(load_project(root), **kwargs)  # type: ignore[arg-type]


def source_digest(root: Path) -> str:
    """A short digest of the project's Python sources (names a version in logs)."""
    digest = hashlib.blake2b(digest_size=6)
    for path in project_files(root, suffixes=(".py",)):
        digest.update(str(path.relative_to(root)).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            continue
    return digest.hexdigest()


def project_files(root: Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """Files of a project, skipping hidden directories, caches and virtual environments."""
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if suffixes is None or name.endswith(suffixes):
                found.append(Path(directory) / name)
    return found
