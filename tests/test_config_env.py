"""Environments (``[env.NAME]``) in every config format, selected as wrangler selects them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.config import load_project
from ember.errors import ConfigError
from ember.runtime.deployment import deployment_from_project

YAML = """
name: shop
main: src/entry.py
compatibility_date: 2025-11-02
compatibility_flags: [python_workers]
vars: {STAGE: top, ONLY_TOP: "1"}
kv_namespaces: [{binding: CACHE, id: top-cache}]
triggers: {crons: ["*/5 * * * *"]}
limits: {cpu_ms: 50}
dev: {port: 9000}
env:
  staging:
    vars: {STAGE: staging}
    kv_namespaces: [{binding: CACHE, id: staging-cache}]
    limits: {cpu_ms: 70}
  production:
    name: shop-live
    main: src/live.py
"""

TOML = """
name = "shop"
main = "src/entry.py"
compatibility_date = "2025-11-02"
compatibility_flags = ["python_workers"]
vars = { STAGE = "top", ONLY_TOP = "1" }
kv_namespaces = [{ binding = "CACHE", id = "top-cache" }]
triggers = { crons = ["*/5 * * * *"] }
limits = { cpu_ms = 50 }
dev = { port = 9000 }

[env.staging]
vars = { STAGE = "staging" }
kv_namespaces = [{ binding = "CACHE", id = "staging-cache" }]
limits = { cpu_ms = 70 }

[env.production]
name = "shop-live"
main = "src/live.py"
"""

JSONC = """
{
  "name": "shop",
  "main": "src/entry.py",
  "compatibility_date": "2025-11-02",
  "compatibility_flags": ["python_workers"],
  "vars": {"STAGE": "top", "ONLY_TOP": "1"},
  "kv_namespaces": [{"binding": "CACHE", "id": "top-cache"}],
  "triggers": {"crons": ["*/5 * * * *"]},
  "limits": {"cpu_ms": 50},
  "dev": {"port": 9000},
  // one section per environment, as create-cloudflare's templates write them
  "env": {
    "staging": {
      "vars": {"STAGE": "staging"},
      "kv_namespaces": [{"binding": "CACHE", "id": "staging-cache"}],
      "limits": {"cpu_ms": 70},
    },
    "production": {"name": "shop-live", "main": "src/live.py"},
  },
}
"""
FORMATS = [("ember.yaml", YAML), ("wrangler.toml", TOML), ("wrangler.jsonc", JSONC)]


def _project(tmp_path: Path, filename: str, text: str) -> Path:
    (tmp_path / "src").mkdir(parents=True, exist_ok=True)
    for main in ("entry.py", "live.py"):
        (tmp_path / "src" / main).write_text("async def fetch(request, env, ctx): ...\n")
    (tmp_path / filename).write_text(text)
    return tmp_path


@pytest.mark.parametrize(("filename", "text"), FORMATS)
def test_an_environment_overrides_and_inherits_in_every_format(
    tmp_path: Path, filename: str, text: str
) -> None:
    config = load_project(_project(tmp_path, filename, text), env="staging")
    assert config.env == "staging"
    assert config.name == "shop-staging"  # <top-level name>-<env>
    # Inherited from the top level: main, compatibility, crons; limits are the env's own.
    assert (config.main, config.compatibility_date) == ("src/entry.py", "2025-11-02")
    assert config.compatibility_flags == ("python_workers",)
    assert config.crons == ("*/5 * * * *",) and config.limits.cpu_ms == 70
    assert config.dev.port == 9000  # top-level only
    # Not inherited: the env's vars replace the top level's (ONLY_TOP is gone).
    assert dict(config.vars) == {"STAGE": "staging"}
    deployment = deployment_from_project(config)
    assert [(b.name, dict(b.options)) for b in deployment.bindings] == [
        ("CACHE", {"namespace_id": "staging-cache"})
    ]
    assert deployment.name == "shop-staging"


@pytest.mark.parametrize(("filename", "text"), FORMATS)
def test_an_environment_with_its_own_name_and_main(
    tmp_path: Path, filename: str, text: str
) -> None:
    config = load_project(_project(tmp_path, filename, text), env="production")
    assert (config.name, config.main) == ("shop-live", "src/live.py")
    assert config.limits.cpu_ms == 50  # inherited


@pytest.mark.parametrize(("filename", "text"), FORMATS)
def test_without_an_environment_the_top_level_is_used(
    tmp_path: Path, filename: str, text: str
) -> None:
    for env in (None, ""):  # --env "" targets the top level, as in wrangler
        config = load_project(_project(tmp_path, filename, text), env=env)
        assert (config.env, config.name) == (None, "shop")
        assert dict(config.vars) == {"STAGE": "top", "ONLY_TOP": "1"}
        assert not any("env" in warning for warning in config.warnings)


@pytest.mark.parametrize(("filename", "text"), FORMATS)
def test_top_level_bindings_missing_from_the_env_are_not_inherited_and_warned_about(
    tmp_path: Path, filename: str, text: str
) -> None:
    config = load_project(_project(tmp_path, filename, text), env="production")
    assert dict(config.vars) == {}
    assert deployment_from_project(config).bindings == ()
    assert (
        f'{filename}: "vars" exists at the top level, but not on "env.production". This is not '
        'what you probably want, since "vars" is not inherited by environments. Please add '
        '"vars" to "env.production".'
    ) in config.warnings
    assert any('"kv_namespaces" exists at the top level' in w for w in config.warnings)


def test_an_unknown_environment_is_an_error_naming_the_defined_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_project(_project(tmp_path, "wrangler.toml", TOML), env="qa")
    error = caught.value
    assert (error.key, error.found) == ("env", "qa")
    assert "staging, production" in error.expected
    assert "[env.qa]" in str(error)


def test_an_environment_when_the_file_defines_none_is_a_warning(tmp_path: Path) -> None:
    text = 'name = "shop"\nmain = "src/entry.py"\n[vars]\nSTAGE = "top"\n'
    config = load_project(_project(tmp_path, "wrangler.toml", text), env="qa")
    assert config.name == "shop-qa" and dict(config.vars) == {"STAGE": "top"}
    assert any('No environment found in configuration with name "qa"' in w for w in config.warnings)


def test_the_name_defaults_to_the_directory_then_gets_the_suffix(tmp_path: Path) -> None:
    root = tmp_path / "site"
    _project(root, "ember.yaml", "main: src/entry.py\nenv:\n  staging: {}\n")
    assert load_project(root, env="staging").name == "site-staging"


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("env: [staging]\n", "env", "a mapping of environment names"),
        ("env:\n  staging: 3\n", "env.staging", "a mapping of config keys"),
        ("env:\n  staging:\n    vars: [1]\n", "env.staging.vars", "a mapping of names"),
        ("env:\n  staging:\n    limits: {cpu_ms: -1}\n", "env.staging.limits.cpu_ms", "integer"),
        (
            "env:\n  staging:\n    kv_namespaces: [{binding: 3}]\n",
            "env.staging.kv_namespaces[0].binding",
            "binding name",
        ),
        (
            "env:\n  staging:\n    vars: {KV: 1}\n    kv_namespaces: [{binding: KV}]\n",
            "env.staging.vars.KV",
            "a name no binding uses",
        ),
        (
            "env:\n  staging:\n    ai: {binding: AI, models: 3}\n",
            "env.staging.ai.models",
            "mapping",
        ),
    ],
)
def test_a_malformed_environment_names_file_key_found_and_expected(
    tmp_path: Path, text: str, key: str, expected: str
) -> None:
    root = _project(tmp_path, "ember.yaml", "name: shop\nmain: src/entry.py\n" + text)
    with pytest.raises(ConfigError) as caught:
        deployment_from_project(load_project(root, env="staging"))
    assert caught.value.file == str(root / "ember.yaml")
    assert caught.value.key == key and expected in caught.value.expected


def test_keys_only_the_top_level_sets_are_ignored_in_an_environment(tmp_path: Path) -> None:
    text = "name: shop\nmain: src/entry.py\nenv:\n  staging:\n    dev: {port: 1234}\n"
    config = load_project(_project(tmp_path, "ember.yaml", text), env="staging")
    assert config.dev.port == 8787
    assert any("'env.staging.dev'" in w and "top level" in w for w in config.warnings)


def test_dev_vars_of_the_environment_are_preferred(tmp_path: Path) -> None:
    root = _project(tmp_path, "wrangler.toml", TOML)
    (root / ".dev.vars").write_text("TOKEN=plain\n")
    assert load_project(root, env="staging").secrets == {"TOKEN": "plain"}  # the fallback
    (root / ".dev.vars.staging").write_text("TOKEN=staging\n")
    staging = load_project(root, env="staging")
    assert staging.secrets == {"TOKEN": "staging"}
    assert staging.secrets_file == root / ".dev.vars.staging"
    assert load_project(root).secrets == {"TOKEN": "plain"}  # the top level never reads it
    assert load_project(root, env="production").secrets == {"TOKEN": "plain"}


def test_dot_env_files_of_the_environment_add_to_dot_env(tmp_path: Path) -> None:
    # No .dev.vars*: wrangler merges .env then .env.<env> (the later wins).
    root = _project(tmp_path, "wrangler.toml", TOML)
    (root / ".env").write_text("A=1\nB=1\n")
    (root / ".env.staging").write_text("B=2\n")
    assert load_project(root, env="staging").secrets == {"A": "1", "B": "2"}
    assert load_project(root).secrets == {"A": "1", "B": "1"}
    (root / ".dev.vars").write_text("C=3\n")  # any .dev.vars file wins over every .env file
    assert load_project(root, env="staging").secrets == {"C": "3"}


def test_local_dot_env_files_override_as_wranglers_do(tmp_path: Path) -> None:
    # wrangler's getDefaultEnvFiles: .env, .env.local, .env.<env>, .env.<env>.local (the
    # later wins); .env.local applies with or without an environment.
    root = _project(tmp_path, "wrangler.toml", TOML)
    (root / ".env").write_text("A=env\nB=env\nC=env\nD=env\n")
    (root / ".env.local").write_text("B=local\nC=local\nD=local\n")
    (root / ".env.staging").write_text("C=staging\nD=staging\n")
    (root / ".env.staging.local").write_text("D=staging-local\n")
    assert load_project(root).secrets == {"A": "env", "B": "local", "C": "local", "D": "local"}
    staging = load_project(root, env="staging")
    assert staging.secrets == {"A": "env", "B": "local", "C": "staging", "D": "staging-local"}
    assert root / ".env.staging.local" in staging.watched_files()


def test_the_environments_secrets_file_is_watched(tmp_path: Path) -> None:
    root = _project(tmp_path, "wrangler.toml", TOML)
    (root / ".dev.vars.staging").write_text("TOKEN=x\n")
    assert root / ".dev.vars.staging" in load_project(root, env="staging").watched_files()
