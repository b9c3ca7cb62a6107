"""A project's config checked past its own file: the one meaning ``ember dev`` runs and
``ember deploy`` uploads.

``ember.config.load_project`` checks each key on its own; this adds what needs the binding
registry and the runtime: every binding section parsed by its type (an unsupported type is
refused), binding names unique, no var named like a binding, crons that parse, and the warnings
about keys nothing reads and crons that never fire (30 February). ``ember dev``
(``ember.runtime.deployment``) and the deploy reader (``ember.cli.worker_project``) both call
``check_project``, so a config one refuses the other refuses with the same ``ConfigError``, and
what one accepts the other reads the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.bindings.assets.files import exposed
from ember.bindings.assets.rules import directory_rules
from ember.bindings.assets.spec import spec_of
from ember.bindings.base import BindingSpec
from ember.bindings.registry import BindingRegistry, default_registry
from ember.config import ProjectConfig
from ember.errors import ConfigError
from ember.runtime.cron import NEVER_RUNS, CronExpression


@dataclass(frozen=True, slots=True)
class CheckedProject:
    """A config that passed every check, with its bindings as typed specs."""

    config: ProjectConfig
    bindings: tuple[BindingSpec, ...]
    warnings: tuple[str, ...]  # the config's own, then each key nothing reads

    def bindings_of(self, kind: str) -> tuple[BindingSpec, ...]:
        """The bindings of one kind (``kv_namespace``, ``ai``), in the config's order."""
        return tuple(spec for spec in self.bindings if spec.kind == kind)


def check_project(config: ProjectConfig, registry: BindingRegistry | None = None) -> CheckedProject:
    """``config`` checked as a whole; ConfigError (file, key, found, expected) if it is not."""
    registry = registry or default_registry()
    bindings = registry.parse(config.binding_sections)
    assets = spec_of(config.assets) if config.assets is not None else None
    if assets is not None:
        taken = {spec.name: spec.kind for spec in bindings}
        if assets.name in taken:
            raise ConfigError(
                str(config.file),
                config.where("assets") + ".binding",
                assets.name,
                f"a binding name not already used by {taken[assets.name]}",
            )
        bindings = (*bindings, assets)
    _check_unique_names(config, bindings)
    never: list[str] = []
    for index, cron in enumerate(config.crons):
        key = f"{config.where('triggers')}.crons[{index}]"
        try:
            expression = CronExpression.parse(cron)
        except ValueError as exc:
            raise ConfigError(str(config.file), key, cron, str(exc)) from None
        if (why := expression.never_fires()) is not None:
            never.append(f"{config.file.name}: {key} {cron!r} never fires: {why} {NEVER_RUNS}")
    ignored = registry.ignored(config.binding_sections)
    warnings = (
        *config.warnings,
        *(f"{config.file.name}: unexpected field {key!r} (ignored)" for key in ignored),
        *_exposed(config),
        *_rule_warnings(config),
        *never,
    )
    return CheckedProject(config, bindings, warnings)


def _exposed(config: ProjectConfig) -> list[str]:
    """A warning when the assets directory would publish the project's config file or main
    module (``"directory": "."``): the worker's source and settings, served to anyone."""
    if config.assets is None:
        return []
    files = [config.file, *([config.root / config.main] if config.main else [])]
    found = exposed(config.assets.directory, files)
    if not found:
        return []
    return [
        f"{config.file.name}: {config.where('assets')}.directory publishes "
        + ", ".join(found)
        + " as static assets, readable by anyone: put the assets in their own "
        "directory (such as public/), or leave these out with .assetsignore in the assets "
        "directory"
    ]


def _rule_warnings(config: ProjectConfig) -> list[str]:
    """The lines of the assets directory's ``_redirects`` and ``_headers`` that are skipped
    (wrangler warns about each at deploy, and Miniflare at dev start)."""
    if config.assets is None:
        return []
    _, notes = directory_rules(config.assets.directory, config.assets.html_handling)
    return [assets_prefix(config) + note for note in notes]


def assets_prefix(config: ProjectConfig) -> str:
    """The assets directory as a warning names it, relative to the project (``public/``)."""
    directory = config.assets.directory if config.assets is not None else config.root
    if not directory.is_relative_to(config.root):
        return f"{directory}/"
    relative = directory.relative_to(config.root).as_posix()
    return "" if relative == "." else f"{relative}/"


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
