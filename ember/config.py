"""Project config: ``ember.yaml``, or the same subset of ``wrangler.toml`` / ``wrangler.jsonc``.

Owns reading the files of one project directory into a typed ``ProjectConfig``: name, main
module, compatibility date and flags, vars, secrets (``.dev.vars``), crons, limits, dev server
settings, ``keep_vars``, and the *raw* binding sections, as one environment sees them
(``[env.NAME]``, chosen by ``ember.config_env``; ``None``: the top level). Binding sections stay raw
(``ConfigSection``) because the binding registry (``ember.bindings.registry``) owns which
binding types exist; it turns each section into typed specs and reports errors through the same
``ConfigError``.

Every error names the file, the key, what was found and what was expected (style R9).
``ember dev`` and ``ember deploy`` both read a project through ``load_project`` (a deploy
without the secrets files, which are ``ember dev``'s alone), so a config means one thing to both.
"""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ember.config_assets import AssetsConfig, assets_value
from ember.config_env import Selected, select_environment
from ember.config_keys import KNOWN_KEYS
from ember.config_values import (
    DevConfig,
    JSONValue,
    LimitsConfig,
    bool_value,
    crons_value,
    date_value,
    dev_value,
    limits_value,
    opt_str,
    str_list,
    vars_value,
)
from ember.config_yaml import load_yaml
from ember.dotenv import parse_dotenv
from ember.errors import ConfigError
from ember.jsonc import JSONCError, strip_jsonc
from ember.module_rules import ModulesConfig, modules_value, parse_rules

# Searched in this order; the first one present is the project's config.
CONFIG_FILES = ("ember.yaml", "ember.yml", "wrangler.toml", "wrangler.jsonc", "wrangler.json")
# Secrets for ``ember dev``, as wrangler's dev-vars.ts picks them: ``.dev.vars.<env>`` before
# ``.dev.vars`` (one file); only when neither exists, ``.env`` then ``.env.<env>``, merged.
SECRETS_FILES = (".dev.vars", ".env")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


@dataclass(frozen=True, slots=True)
class ConfigSection:
    """One raw section of a config file (e.g. ``kv_namespaces``) with where it came from."""

    file: str
    key: str
    value: object
    where: str = ""  # the section's path in the file when not ``key`` (``env.staging.ai``)

    @property
    def path(self) -> str:
        """Where the section is written: ``kv_namespaces`` or ``env.staging.kv_namespaces``."""
        return self.where or self.key

    def error(self, key: str | None, found: object, expected: str) -> ConfigError:
        """A ConfigError for ``key`` inside this section (``None``: the section itself)."""
        return ConfigError(self.file, f"{self.path}{key or ''}", found, expected)

    def relocate(self, exc: ConfigError) -> ConfigError:
        """``exc``, raised with the section's flat key by a parser that does not know where
        the section is written (``ai.models`` -> ``env.staging.ai.models``)."""
        key = exc.key or ""
        if not self.where or not key.startswith(self.key) or key.startswith(self.where):
            return exc
        where = self.where + key[len(self.key) :]
        return ConfigError(exc.file, where, exc.found, exc.expected, hint=exc.hint)


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """A project directory's config, parsed once at the edge (style R5)."""

    root: Path
    file: Path
    name: str
    main: str
    compatibility_date: str | None
    compatibility_flags: tuple[str, ...]
    vars: Mapping[str, JSONValue]
    secrets: Mapping[str, str] = field(repr=False)
    secrets_files: tuple[Path, ...]  # read in order, a later file's values win
    crons: tuple[str, ...]
    limits: LimitsConfig
    dev: DevConfig
    binding_sections: tuple[ConfigSection, ...]  # every top-level key that is not core
    warnings: tuple[str, ...] = ()
    env: str | None = None  # the environment in use; None: the top level
    environments: tuple[str, ...] = ()  # every environment the file defines
    env_keys: frozenset[str] = frozenset()  # keys written in the environment's section
    named: bool = True  # the file names the worker (else it is named after the directory)
    crons_set: bool = False  # triggers.crons is written (a deploy replaces the schedules then)
    keep_vars: bool = False  # top level only: a deploy keeps the platform's vars (--keep-vars)
    modules: ModulesConfig = ModulesConfig()  # rules, base_dir, ...: which files are modules
    assets: AssetsConfig | None = None  # Workers Static Assets (``assets``), if configured

    @property
    def has_worker(self) -> bool:
        """False for an assets-only project (``assets`` and no ``main``): no worker runs."""
        return bool(self.main)

    @property
    def module_root(self) -> Path:
        """The directory module names are relative to: ``base_dir``, else the entry's."""
        return self.modules.base_dir or self.main_path.parent

    def where(self, key: str) -> str:
        """Where ``key`` is written: ``vars``, or ``env.staging.vars``."""
        return f"env.{self.env}.{key}" if key in self.env_keys else key

    @property
    def secrets_file(self) -> Path | None:
        """The secrets file whose values win (errors about a secret name it)."""
        return self.secrets_files[-1] if self.secrets_files else None

    @property
    def main_path(self) -> Path:
        """Absolute path of the main module."""
        return self.root / self.main

    def watched_files(self) -> tuple[Path, ...]:
        """Config files whose change means the project must be re-read: every config and
        secrets file ``load_project`` would look for with this environment, those that do not
        exist yet included (creating one changes what is read)."""
        configs = (self.root / name for name in CONFIG_FILES)
        return tuple(dict.fromkeys([self.file, *configs, *secrets_candidates(self.root, self.env)]))


def find_config_file(root: Path) -> Path:
    """The project's config file, or a ConfigError listing what was looked for."""
    if not root.is_dir():
        raise ConfigError(str(root), None, "not a directory", "a project directory")
    for name in CONFIG_FILES:
        candidate = root / name
        if candidate.is_file():
            return candidate
    raise ConfigError(
        str(root),
        None,
        "no config file",
        "one of " + ", ".join(CONFIG_FILES),
        hint="create one with `ember init NAME`",
    )


def load_project(
    root: Path | str,
    *,
    env: str | None = None,
    extra_vars: Mapping[str, str] | None = None,
    secrets: bool = True,
    name: str | None = None,
) -> ProjectConfig:
    """Read ``root``'s config file and secrets into a ``ProjectConfig``, as environment ``env``
    (``[env.NAME]``) sees them; ``None`` or ``""``: the top level.

    ``secrets=False`` leaves the secrets files (``.dev.vars``, ``.env``) unread: they are
    ``ember dev``'s, and a deploy must neither upload them nor fail on them. ``name`` (deploy's
    ``--name``) replaces the worker's name as it is: the platform judges it, and the directory's
    name, which it stands in for, is not checked either."""
    root = Path(root).resolve()
    path = find_config_file(root)
    document = read_document(path)
    named = document.get("name") is not None
    if not named:
        document["name"] = root.name  # the default name, which an environment suffixes
    selected = select_environment(document, env, str(path))
    named = named or "name" in selected.from_env
    try:
        return _parse(root, path, selected, extra_vars, secrets, named=named, name=name)
    except ConfigError as exc:
        raise selected.relocate(exc) from None  # named where it is written: env.NAME.key


def _parse(
    root: Path,
    path: Path,
    selected: Selected,
    extra_vars: Mapping[str, str] | None,
    read_secrets: bool,
    *,
    named: bool,
    name: str | None,
) -> ProjectConfig:
    data = selected.data
    fname = str(path)
    warnings: list[str] = []
    others = [n for n in CONFIG_FILES if n != path.name and (root / n).is_file()]
    if others:
        warnings.append(f"using {path.name}; ignoring {', '.join(others)}")
    warnings.extend(selected.warnings)

    worker_name = opt_str(data, "name", fname) or root.name
    if (named or name is None) and not _NAME.match(worker_name):
        raise ConfigError(
            fname, "name", worker_name, "letters, digits, '-' or '_', at most 63 chars"
        )
    assets = assets_value(data["assets"], fname, root) if "assets" in data else None
    default_main = "worker.py" if path.suffix in (".yaml", ".yml") else None
    if assets is not None and default_main and not (root / default_main).is_file():
        default_main = None  # ember.yaml with assets and no worker.py: assets only
    main = opt_str(data, "main", fname) or default_main
    if main is None and assets is not None:
        return _assets_only(root, path, selected, worker_name, assets, warnings, named, name)
    if main is None:
        raise ConfigError(fname, "main", None, "the path of the worker's Python module")
    main_path = (root / main).resolve()
    if main_path.suffix != ".py":
        raise ConfigError(fname, "main", main, "a Python module ending in .py")
    if not main_path.is_relative_to(root):
        raise ConfigError(fname, "main", main, "a path inside the project directory")
    if not main_path.is_file():
        raise ConfigError(fname, "main", main, f"an existing file under {root}")

    modules = modules_value(data, fname, root)
    if modules.base_dir is not None and not main_path.is_relative_to(modules.base_dir):
        raise ConfigError(fname, "base_dir", data["base_dir"], f"a directory that holds {main}")
    warnings.extend(parse_rules(modules.rules)[1])

    vars_ = vars_value(data.get("vars", {}), fname)
    secrets_files = secrets_files_of(root, selected.env) if read_secrets else ()
    secrets: dict[str, str] = {}
    for secrets_file in secrets_files:
        secrets.update(parse_dotenv(secrets_file))
    for secret_name in secrets:
        vars_.pop(secret_name, None)  # .dev.vars overrides vars, as in wrangler
    for var_name, value in (extra_vars or {}).items():
        secrets.pop(var_name, None)  # and --var overrides both, as wrangler dev's --var does
        vars_[var_name] = value

    compatibility_date = date_value(data.get("compatibility_date"), fname)
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    if compatibility_date is not None and compatibility_date > today:
        warnings.append(
            f'{path.name}: compatibility_date "{compatibility_date}" is in the future (today is '
            f"{today} UTC): ember dev runs the worker, but a deploy is refused, as Cloudflare "
            "refuses it (10021)"
        )

    return ProjectConfig(
        root=root,
        file=path,
        name=name or worker_name,
        main=main_path.relative_to(root).as_posix(),
        compatibility_date=compatibility_date,
        compatibility_flags=str_list(
            data.get("compatibility_flags", []), fname, "compatibility_flags"
        ),
        vars=vars_,
        secrets=secrets,
        secrets_files=secrets_files,
        crons=crons_value(data.get("triggers"), fname),
        crons_set=_has_crons(data.get("triggers")),
        keep_vars=bool_value(data.get("keep_vars", False), fname, "keep_vars"),
        modules=modules,
        limits=limits_value(data.get("limits"), fname),
        dev=dev_value(data.get("dev"), fname),
        binding_sections=tuple(
            ConfigSection(fname, key, data[key], selected.where(key))
            for key in data
            if key not in KNOWN_KEYS
        ),
        warnings=tuple(warnings),
        env=selected.env,
        environments=selected.environments,
        env_keys=selected.from_env,
        named=named,
        assets=assets,
    )


def _assets_only(
    root: Path,
    path: Path,
    selected: Selected,
    worker_name: str,
    assets: AssetsConfig,
    warnings: list[str],
    named: bool,
    name: str | None,
) -> ProjectConfig:
    """An assets-only project: no ``main``, so no worker, vars, bindings or crons run; every
    request is answered from the assets (a 404 where none matches), as on the platform."""
    fname = str(path)
    data = selected.data
    if assets.binding is not None:
        raise ConfigError(
            fname,
            "assets.binding",
            assets.binding,
            "no binding in an assets-only project (add `main`, a worker that uses it)",
        )
    return ProjectConfig(
        root=root,
        file=path,
        name=name or worker_name,
        main="",
        compatibility_date=date_value(data.get("compatibility_date"), fname),
        compatibility_flags=str_list(
            data.get("compatibility_flags", []), fname, "compatibility_flags"
        ),
        vars={},
        secrets={},
        secrets_files=(),
        crons=(),
        limits=LimitsConfig(),
        dev=dev_value(data.get("dev"), fname),
        binding_sections=(),
        warnings=tuple(warnings),
        env=selected.env,
        environments=selected.environments,
        env_keys=selected.from_env,
        named=named,
        assets=assets,
    )


def _has_crons(triggers: object) -> bool:
    return isinstance(triggers, dict) and "crons" in triggers


def secrets_files_of(root: Path, env: str | None) -> tuple[Path, ...]:
    """The secrets files ``ember dev`` reads for ``env``, in order (a later one wins)."""
    dev_vars, dot_env = _secrets_names(env)
    for name in dev_vars:
        if (root / name).is_file():
            return (root / name,)
    return tuple(root / n for n in dot_env if (root / n).is_file())


def secrets_candidates(root: Path, env: str | None) -> tuple[Path, ...]:
    """Every file ``secrets_files_of`` looks for, whether it exists or not."""
    dev_vars, dot_env = _secrets_names(env)
    return tuple(root / name for name in [*dev_vars, *dot_env])


def _secrets_names(env: str | None) -> tuple[list[str], list[str]]:
    # .dev.vars.<env> before .dev.vars (the first found is the one file read); else wrangler's
    # getDefaultEnvFiles: .env, .env.local, .env.<env>, .env.<env>.local (merged, later wins).
    dev_vars = [*([f"{SECRETS_FILES[0]}.{env}"] if env else []), SECRETS_FILES[0]]
    base = SECRETS_FILES[1]
    dot_env = [base, f"{base}.local", *([f"{base}.{env}", f"{base}.{env}.local"] if env else [])]
    return dev_vars, dot_env


def read_document(path: Path) -> dict[str, object]:
    """One config file parsed by its suffix (YAML, TOML, JSONC), every failure a ConfigError
    naming the file; shared by ``ember dev`` and ``ember deploy`` so both read it alike."""
    fname = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            fname, None, f"bytes that are not UTF-8 ({exc.reason})", "UTF-8 text"
        ) from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = load_yaml(text, fname)
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(strip_jsonc(text))
    except RecursionError:  # a TOML or JSON document nested deeper than the parser recurses
        raise ConfigError(fname, None, "nesting too deep to read", "a config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(fname, None, str(exc), "valid TOML") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            fname, f"line {exc.lineno}, column {exc.colno}", exc.msg, "valid JSONC"
        ) from None
    except JSONCError as exc:
        raise ConfigError(fname, None, str(exc), "valid JSONC") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(fname, None, type(data).__name__, "a mapping of keys at the top level")
    for key in data:
        if not isinstance(key, str):
            raise ConfigError(fname, str(key), key, "string keys")
    return data
