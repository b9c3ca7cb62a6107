"""Environments: the ``env`` sections of a config file, and the one a command selects.

``[env.staging]`` (wrangler.toml), ``"env": {"staging": {...}}`` (wrangler.jsonc/json) and
``env: {staging: ...}`` (ember.yaml) override the top level for one environment. This module
turns the document and a selected environment name into the *flat* document that
``ember.config`` and the deploy reader parse, with wrangler's rules (workers-sdk
``packages/workers-utils/src/config/validation.ts``: ``normalizeAndValidateConfig``,
``normalizeAndValidateEnvironment``; ``validation-helpers.ts``: ``inheritable``,
``notInheritable``, ``appendEnvName``):

- *Inheritable* keys (``main``, ``compatibility_*``, ``triggers``, ``limits``, ``routes``, ...)
  fall back to the top level when the environment lacks them.
- *Non-inheritable* keys (``vars``, ``define`` and every binding section: ``kv_namespaces``,
  ``ai``, ``services``, ...) are the environment's own; one set only at the top level is dropped,
  with wrangler's warning.
- *Top-level-only* keys (``dev``, ``keep_vars``, ...) always come from the top level; set inside
  an environment they are reported as unexpected and ignored.
- ``name`` is the environment's own, else ``<top-level name>-<env>``.
- An unknown environment name is an error when the file defines environments, and a warning
  (the top level is used, its name suffixed) when it defines none.

ember's own keys follow the section they sit in: ``ai.models`` / ``ai.pool`` / ``ai.limits``
belong to ``ai``, which is not inherited, so an environment that sets ``ai`` brings its own
model settings; the ``dev`` section is top-level only, as in wrangler.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ConfigError

# validation.ts's ``inheritable(...)`` fields (and ``usage_model``, inherited in wrangler v2/v3).
INHERITABLE_KEYS = frozenset(
    {
        "name",
        "account_id",
        "compatibility_date",
        "compatibility_flags",
        "main",
        "find_additional_modules",
        "preserve_file_names",
        "base_dir",
        "workers_dev",
        "preview_urls",
        "routes",
        "route",
        "tsconfig",
        "jsx_factory",
        "jsx_fragment",
        "migrations",
        "exports",
        "triggers",
        "limits",
        "rules",
        "build",
        "no_bundle",
        "minify",
        "keep_names",
        "first_party_worker",
        "logfwdr",
        "logpush",
        "upload_source_maps",
        "placement",
        "assets",
        "observability",
        "access",
        "cache",
        "compliance_region",
        "python_modules",
        "previews",
        "usage_model",
    }
)
# validation.ts's ``notInheritable(...)`` fields: vars, define, and the bindings.
NOT_INHERITABLE_KEYS = frozenset(
    {
        "define",
        "vars",
        "secrets",
        "durable_objects",
        "workflows",
        "cloudchamber",
        "containers",
        "kv_namespaces",
        "send_email",
        "queues",
        "connect",
        "r2_buckets",
        "d1_databases",
        "vectorize",
        "ai_search_namespaces",
        "ai_search",
        "agent_memory",
        "websearch",
        "hyperdrive",
        "services",
        "analytics_engine_datasets",
        "browser",
        "ai",
        "images",
        "media",
        "stream",
        "version_metadata",
        "unsafe",
        "mtls_certificates",
        "tail_consumers",
        "streaming_tail_consumers",
        "dispatch_namespaces",
        "pipelines",
        "secrets_store_secrets",
        "artifacts",
        "unsafe_hello_world",
        "flagship",
        "ratelimits",
        "worker_loaders",
        "vpc_services",
        "vpc_networks",
    }
)
# config.ts's ``ConfigFields``: read from the top level whatever environment is selected.
TOP_LEVEL_ONLY_KEYS = frozenset(
    {
        "$schema",
        "send_metrics",
        "dependencies_instrumentation",
        "dev",
        "site",
        "wasm_modules",
        "text_blobs",
        "data_blobs",
        "alias",
        "keep_vars",
        "addresses",
    }
)
# The environment's name becomes part of the worker's name (``<name>-<env>``).
_ENV_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True, slots=True)
class Selected:
    """The flat document of one environment, and where each of its keys was written."""

    data: dict[str, object]
    env: str | None  # None: the top level
    environments: tuple[str, ...]  # every environment the file defines
    warnings: tuple[str, ...]
    from_env: frozenset[str]  # keys taken from the env section (errors name env.<env>.<key>)

    def where(self, key: str) -> str:
        """The path of ``key`` as written in the file: ``env.staging.vars`` or ``vars``."""
        return f"env.{self.env}.{key}" if key in self.from_env else key

    def relocate(self, exc: ConfigError) -> ConfigError:
        """``exc`` with its key named where it is written (a flat key may come from an env)."""
        if exc.key is None:
            return exc
        head = re.split(r"[.\[]", exc.key, maxsplit=1)[0]
        if head not in self.from_env:
            return exc
        return ConfigError(
            exc.file, f"env.{self.env}.{exc.key}", exc.found, exc.expected, hint=exc.hint
        )


def select_environment(data: Mapping[str, object], env: str | None, fname: str) -> Selected:
    """The document ``data`` (from ``fname``) as environment ``env`` sees it (None or "": the
    top level); ConfigError for a malformed ``env`` key or an environment that does not exist."""
    sections = _sections(data.get("env"), fname)
    top = {k: v for k, v in data.items() if k != "env"}
    names = tuple(sections)
    if not env:
        return Selected(top, None, names, (), frozenset())
    file = Path(fname).name
    if env not in sections:
        if names:
            raise ConfigError(
                fname,
                "env",
                env,
                "one of the environments the file defines: " + ", ".join(names),
                hint=f"add {_snippet(file, env)} to {file} before using --env={env}",
            )
        # wrangler only warns when the file has no environments at all, and runs the top
        # level under the environment's worker name.
        warning = (
            f'{file}: No environment found in configuration with name "{env}". Before using '
            f"`--env={env}` there should be an equivalent environment section in the "
            f"configuration. Consider adding {_snippet(file, env)} to {file}."
        )
        return Selected(_renamed(top, env), env, names, (warning,), frozenset())
    return _merge(top, sections[env], env, names, fname)


def _sections(value: object, fname: str) -> dict[str, dict[str, object]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            fname, "env", value, "a mapping of environment names to sections, such as [env.staging]"
        )
    sections: dict[str, dict[str, object]] = {}
    for name, section in value.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ConfigError(
                fname, "env", name, "environment names of letters, digits, '-' or '_'"
            )
        if section is None:
            section = {}  # `staging:` with nothing under it in YAML: an empty environment
        if not isinstance(section, dict):
            raise ConfigError(
                fname, f"env.{name}", section, "a mapping of config keys, as at the top level"
            )
        for key in section:
            if not isinstance(key, str):
                raise ConfigError(fname, f"env.{name}", key, "string keys")
        sections[name] = section
    return sections


def _renamed(top: dict[str, object], env: str) -> dict[str, object]:
    """``top`` under the environment's worker name (wrangler's ``appendEnvName``)."""
    data = dict(top)
    name = top.get("name")
    if isinstance(name, str) and name:
        data["name"] = f"{name}-{env}"
    return data


def _merge(
    top: dict[str, object],
    section: dict[str, object],
    env: str,
    names: tuple[str, ...],
    fname: str,
) -> Selected:
    file = Path(fname).name
    known = INHERITABLE_KEYS | NOT_INHERITABLE_KEYS
    warnings: list[str] = []
    # The environment's own keys first, in its order: its binding sections keep the order it
    # writes them in (the order ``env`` shows them and duplicate names are reported in).
    data = {key: value for key, value in section.items() if key in known}
    for key, value in top.items():
        if key in data:
            continue
        if key in NOT_INHERITABLE_KEYS:
            warnings.append(
                f'{file}: "{key}" exists at the top level, but not on "env.{env}". This is not '
                f'what you probably want, since "{key}" is not inherited by environments. '
                f'Please add "{key}" to "env.{env}".'
            )
        else:
            # Inherited, or top-level only, or unknown (then reported once, by the caller, as
            # an unexpected top-level field).
            data[key] = value
    if "name" not in section:
        data = _renamed(data, env)
    for key in section:
        if key not in known:
            why = "only the top level sets it" if key in TOP_LEVEL_ONLY_KEYS else "not a config key"
            warnings.append(f"{file}: unexpected field 'env.{env}.{key}' (ignored: {why})")
    return Selected(data, env, names, tuple(warnings), frozenset(k for k in section if k in known))


def _snippet(file: str, env: str) -> str:
    """The section to add, written as ``file``'s format writes it."""
    if file.endswith(".toml"):
        return f"[env.{env}]"
    if file.endswith((".json", ".jsonc")):
        return f'"env": {{"{env}": {{}}}}'
    return f"env: {{{env}: {{}}}}"
