"""Read a worker project and turn it into what ``ember deploy`` uploads.

The config is read and checked as ``ember dev`` reads it (``ember.config.load_project``
without the secrets files, then ``ember.runtime.project_check``); this module takes from it
what a deploy uploads (name, main, compatibility date and flags, vars, KV and AI bindings,
crons, keep_vars). The files uploaded are what wrangler uploads for a Python Worker: every
``.py`` module under the entry's directory (the module root, names relative to it), the
project's ``python_modules/`` (vendored packages, as ``python_modules/<path>``), and other files
under the module root as data modules (text or bytes), so the worker can read its templates and
data. The project's config files (``CONFIG_FILES`` at its root) are never uploaded. With an
environment (``--env NAME``), the keys are those ``ember.config_env`` selects for it.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.bindings.base import BindingSpec
from ember.config import CONFIG_FILES
from ember.config import load_project as load_config
from ember.errors import ConfigError
from ember.runtime.deployments.multipart import Part
from ember.runtime.project_check import check_project

SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".wrangler", ".ember", ".venv"}
TEXT_SUFFIXES = {".txt", ".html", ".json", ".md", ".css", ".csv", ".jinja", ".toml", ".yaml"}


@dataclass(frozen=True)
class KVBinding:
    binding: str
    id: str | None


@dataclass(frozen=True)
class WorkerProject:
    root: Path
    config_file: Path
    name: str
    main: Path
    compatibility_date: str | None
    compatibility_flags: tuple[str, ...]
    vars: dict[str, Any] = field(default_factory=dict)
    kv_namespaces: tuple[KVBinding, ...] = ()
    ai_binding: str | None = None
    crons: tuple[str, ...] | None = None  # triggers.crons; None when the config has none
    keep_vars: bool = False  # the config's keep_vars (top level only), as --keep-vars
    env: str | None = None  # the environment deployed; None: the top level
    environments: tuple[str, ...] = ()  # every environment the config defines
    warnings: tuple[str, ...] = ()

    @property
    def module_root(self) -> Path:
        return self.main.parent

    def modules(self) -> list[Part]:
        """The module parts, entry first, named like wrangler names them."""
        entry = self.main.relative_to(self.module_root).as_posix()
        parts = [Part(entry, entry, "text/x-python", self.main.read_bytes())]
        # The project's config files are not modules: wrangler never uploads its config, and
        # with the entry at the project's root they would otherwise go up as data.
        configs = {(self.root / n).resolve() for n in CONFIG_FILES}
        for path in sorted(_files(self.module_root)):
            name = path.relative_to(self.module_root).as_posix()
            if name == entry or name.startswith("python_modules/") or path.resolve() in configs:
                continue
            parts.append(Part(name, name, _content_type(path), path.read_bytes()))
        vendored = self.root / "python_modules"
        if vendored.is_dir():
            for path in sorted(_files(vendored)):
                name = "python_modules/" + path.relative_to(vendored).as_posix()
                parts.append(Part(name, name, "application/octet-stream", path.read_bytes()))
        return parts


def _files(root: Path) -> list[Path]:
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if path.is_file() and not any(p in SKIP_DIRS or p.startswith(".") for p in rel):
            out.append(path)
    return out


def _content_type(path: Path) -> str:
    if path.suffix == ".py":
        return "text/x-python"
    if path.suffix in TEXT_SUFFIXES:
        return "text/plain"
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


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
    return WorkerProject(
        root=config.root,
        config_file=config.file,
        name=config.name,
        main=config.main_path,
        compatibility_date=config.compatibility_date,
        compatibility_flags=flags,
        vars=dict(config.vars),
        kv_namespaces=tuple(_kv(spec) for spec in checked.bindings_of("kv_namespace")),
        ai_binding=ai[0].name if ai else None,
        crons=config.crons if config.crons_set else None,
        keep_vars=config.keep_vars,
        env=config.env,
        environments=config.environments,
        warnings=checked.warnings,
    )


def _kv(spec: BindingSpec) -> KVBinding:
    """A KV binding to upload: its namespace id, or None where the config gives none (dev names
    that one after the binding; a deploy provisions a namespace for it)."""
    if spec.options.get("default_id"):
        return KVBinding(spec.name, None)
    return KVBinding(spec.name, str(spec.options["namespace_id"]))
