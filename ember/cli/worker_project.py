"""Read a worker project and turn it into what ``ember deploy`` uploads.

The project's config file is the one ``ember dev`` reads (``ember.config.find_config_file``,
parsed by ``ember.config.read_document``); this module reads the keys a deploy needs (name,
main, compatibility date and flags, vars, KV namespaces, AI, crons, keep_vars). The files
uploaded are what wrangler uploads for a Python Worker: every ``.py`` module under the entry's
directory (the module root, names relative to it), the project's ``python_modules/`` (vendored
packages, as ``python_modules/<path>``), and other files under the module root as data modules
(text or bytes), so the worker can read its templates and data. The project's config files
(``CONFIG_FILES`` at its root) are never uploaded. With an environment (``--env NAME``), the
keys are those ``ember.config_env`` selects for it.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.config import CONFIG_FILES, find_config_file, read_document
from ember.config_env import Selected, select_environment
from ember.errors import ConfigError
from ember.runtime.deployments.multipart import Part

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
    ``name_override`` (``--name``) replaces the worker's name as it is, as wrangler's does."""
    config_file = find_config_file(directory)
    selected = select_environment(read_document(config_file), env, str(config_file))
    try:
        return _project(directory, config_file, selected, name_override)
    except ConfigError as exc:
        raise selected.relocate(exc) from None  # named where it is written: env.NAME.key


def _project(
    directory: Path, config_file: Path, selected: Selected, name_override: str | None
) -> WorkerProject:
    raw = selected.data
    where = str(config_file)
    name = name_override or raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(where, "name", name, "the Worker's name (or pass --name)")
    main_value = raw.get("main")
    if not isinstance(main_value, str):
        raise ConfigError(
            where, "main", main_value, "the path of the entry module, e.g. src/entry.py"
        )
    main = (directory / main_value).resolve()
    if not main.is_file() or main.suffix != ".py":
        raise ConfigError(where, "main", main_value, "an existing .py file")
    flags = raw.get("compatibility_flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise ConfigError(where, "compatibility_flags", flags, "a list of strings")
    if "python_workers" not in flags:
        flags = [*flags, "python_workers"]
    variables = raw.get("vars", {})
    if not isinstance(variables, dict):
        raise ConfigError(where, "vars", variables, "a mapping of names to values")
    ai = raw.get("ai")
    ai_binding = ai.get("binding") if isinstance(ai, dict) else None
    date = raw.get("compatibility_date")
    triggers = raw.get("triggers")
    crons = triggers.get("crons") if isinstance(triggers, dict) else None
    if crons is not None and (
        not isinstance(crons, list) or not all(isinstance(c, str) for c in crons)
    ):
        raise ConfigError(where, "triggers.crons", crons, "a list of cron expressions")
    keep_vars = raw.get("keep_vars", False)
    if not isinstance(keep_vars, bool):
        raise ConfigError(where, "keep_vars", keep_vars, "true or false")
    return WorkerProject(
        root=directory.resolve(),
        config_file=config_file,
        name=name,
        main=main,
        compatibility_date=str(date) if date is not None else None,
        compatibility_flags=tuple(flags),
        vars=variables,
        kv_namespaces=tuple(_kv(raw.get("kv_namespaces", []), where)),
        ai_binding=ai_binding,
        crons=tuple(crons) if crons is not None else None,
        keep_vars=keep_vars,
        env=selected.env,
        environments=selected.environments,
        warnings=selected.warnings,
    )


def _kv(value: Any, where: str) -> list[KVBinding]:
    if not isinstance(value, list):
        raise ConfigError(where, "kv_namespaces", value, "a list of {binding, id?}")
    out = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("binding"), str):
            raise ConfigError(where, "kv_namespaces", item, "{binding: NAME, id?: ID}")
        out.append(KVBinding(item["binding"], item.get("id")))
    return out
