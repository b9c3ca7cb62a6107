"""Project config: ``ember.yaml``, or the same subset of ``wrangler.toml`` / ``wrangler.jsonc``.

Owns reading the files of one project directory into a typed ``ProjectConfig``: name, main
module, compatibility date and flags, vars, secrets (``.dev.vars``), crons, limits, dev server
settings, and the *raw* binding sections. Binding sections stay raw (``ConfigSection``) because
the binding registry (``ember.bindings.registry``) owns which binding types exist; it turns each
section into typed specs and reports errors through the same ``ConfigError``.

Every error names the file, the key, what was found and what was expected (style R9).
"""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ember.config_values import (
    DevConfig,
    JSONValue,
    LimitsConfig,
    crons_value,
    date_value,
    dev_value,
    limits_value,
    opt_str,
    str_list,
    vars_value,
)
from ember.dotenv import parse_dotenv
from ember.errors import ConfigError
from ember.jsonc import JSONCError, strip_jsonc

# Searched in this order; the first one present is the project's config.
CONFIG_FILES = ("ember.yaml", "ember.yml", "wrangler.toml", "wrangler.jsonc", "wrangler.json")
SECRETS_FILES = (".dev.vars", ".env")

# Top-level keys that wrangler knows as binding types. Every key that is not in KNOWN_KEYS goes
# to the binding registry: registered types are parsed, these are rejected as unsupported (with
# the list of supported ones), anything else is reported as an unexpected field.
BINDING_KEYS = frozenset(
    {
        "kv_namespaces",
        "ai",
        "r2_buckets",
        "d1_databases",
        "durable_objects",
        "queues",
        "services",
        "vectorize",
        "hyperdrive",
        "analytics_engine_datasets",
        "browser",
        "dispatch_namespaces",
        "mtls_certificates",
        "send_email",
        "workflows",
        "version_metadata",
        "images",
        "pipelines",
        "secrets_store_secrets",
        "unsafe",
        "ratelimits",
        "containers",
        "wasm_modules",
        "text_blobs",
        "data_blobs",
        "assets",
    }
)
# Keys wrangler knows that ember reads or safely ignores; anything else gets a warning.
KNOWN_KEYS = frozenset(
    {
        "name",
        "main",
        "compatibility_date",
        "compatibility_flags",
        "vars",
        "triggers",
        "limits",
        "dev",
        "$schema",
        "account_id",
        "workers_dev",
        "routes",
        "route",
        "observability",
        "python_modules",
        "build",
        "rules",
        "no_bundle",
        "minify",
        "env",
        "placement",
        "tail_consumers",
        "logpush",
        "upload_source_maps",
        "keep_vars",
        "send_metrics",
        "find_additional_modules",
        "base_dir",
        "preserve_file_names",
        "usage_model",
        "migrations",
        "preview_urls",
    }
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


@dataclass(frozen=True, slots=True)
class ConfigSection:
    """One raw section of a config file (e.g. ``kv_namespaces``) with where it came from."""

    file: str
    key: str
    value: object

    def error(self, key: str | None, found: object, expected: str) -> ConfigError:
        """A ConfigError for ``key`` inside this section (``None``: the section itself)."""
        return ConfigError(self.file, f"{self.key}{key or ''}", found, expected)


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
    secrets_file: Path | None
    crons: tuple[str, ...]
    limits: LimitsConfig
    dev: DevConfig
    binding_sections: tuple[ConfigSection, ...]  # every top-level key that is not core
    warnings: tuple[str, ...] = ()

    @property
    def main_path(self) -> Path:
        """Absolute path of the main module."""
        return self.root / self.main

    def watched_files(self) -> tuple[Path, ...]:
        """Config files whose change means the project must be re-read."""
        files = [self.file]
        if self.secrets_file is not None:
            files.append(self.secrets_file)
        return tuple(files)


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


def load_project(root: Path | str, *, extra_vars: Mapping[str, str] | None = None) -> ProjectConfig:
    """Read ``root``'s config file and secrets into a ``ProjectConfig``."""
    root = Path(root).resolve()
    path = find_config_file(root)
    data = _read_document(path)
    fname = str(path)
    warnings: list[str] = []
    others = [n for n in CONFIG_FILES if n != path.name and (root / n).is_file()]
    if others:
        warnings.append(f"using {path.name}; ignoring {', '.join(others)}")

    if "env" in data:
        warnings.append(f"{path.name}: environments under 'env' are not supported yet (ignored)")

    name = opt_str(data, "name", fname) or root.name
    if not _NAME.match(name):
        raise ConfigError(fname, "name", name, "letters, digits, '-' or '_', at most 63 chars")
    default_main = "worker.py" if path.suffix in (".yaml", ".yml") else None
    main = opt_str(data, "main", fname) or default_main
    if main is None:
        raise ConfigError(fname, "main", None, "the path of the worker's Python module")
    main_path = (root / main).resolve()
    if main_path.suffix != ".py":
        raise ConfigError(fname, "main", main, "a Python module ending in .py")
    if not main_path.is_relative_to(root):
        raise ConfigError(fname, "main", main, "a path inside the project directory")
    if not main_path.is_file():
        raise ConfigError(fname, "main", main, f"an existing file under {root}")

    vars_ = vars_value(data.get("vars", {}), fname)
    secrets_file = next((root / n for n in SECRETS_FILES if (root / n).is_file()), None)
    secrets = parse_dotenv(secrets_file) if secrets_file is not None else {}
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
        name=name,
        main=main_path.relative_to(root).as_posix(),
        compatibility_date=compatibility_date,
        compatibility_flags=str_list(
            data.get("compatibility_flags", []), fname, "compatibility_flags"
        ),
        vars=vars_,
        secrets=secrets,
        secrets_file=secrets_file,
        crons=crons_value(data.get("triggers"), fname),
        limits=limits_value(data.get("limits"), fname),
        dev=dev_value(data.get("dev"), fname),
        binding_sections=tuple(
            ConfigSection(fname, key, data[key]) for key in data if key not in KNOWN_KEYS
        ),
        warnings=tuple(warnings),
    )


def _read_document(path: Path) -> dict[str, object]:
    fname = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            fname, None, f"bytes that are not UTF-8 ({exc.reason})", "UTF-8 text"
        ) from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(strip_jsonc(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "document"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(fname, where, problem, "valid YAML") from None
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
