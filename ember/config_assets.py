"""The ``assets`` key: Workers Static Assets, as wrangler reads it.

``assets = {directory, binding?, html_handling?, not_found_handling?, run_worker_first?}``.
``directory`` is relative to the config file (wrangler resolves it against the config's
directory) and must exist; ``run_worker_first`` is true/false or a list of ``/path/*`` rules
with ``!/`` negations, checked as the platform checks them (workers-shared's
parseStaticRouting: at most 100 rules of under 100 characters, unique, none made redundant by a
glob, at least one positive rule). Every error names the key and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ember.errors import ConfigError

HTML_HANDLING = ("auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none")
NOT_FOUND_HANDLING = ("none", "404-page", "single-page-application")
ASSETS_KEYS = ("directory", "binding", "html_handling", "not_found_handling", "run_worker_first")
MAX_ROUTES_RULES = 100
MAX_ROUTES_RULE_LENGTH = 100


@dataclass(frozen=True, slots=True)
class AssetsConfig:
    """A project's static assets, parsed once."""

    directory: Path  # absolute
    binding: str | None = None
    html_handling: str = HTML_HANDLING[0]
    not_found_handling: str = NOT_FOUND_HANDLING[0]
    run_worker_first: bool = False
    # The rules of a run_worker_first list: requests matching ``worker_rules`` go to the
    # worker first, unless one of ``asset_rules`` (the ``!/`` rules, without the ``!``) matches.
    worker_rules: tuple[str, ...] = ()
    asset_rules: tuple[str, ...] = ()

    @property
    def static_routing(self) -> bool:
        """run_worker_first is a list (the platform then keeps not_found_handling for every
        request, not only navigations)."""
        return bool(self.worker_rules)


def assets_value(value: object, fname: str, root: Path, key: str = "assets") -> AssetsConfig:
    """``value`` (the ``assets`` section) checked and typed; ``root``: the config's directory."""
    if not isinstance(value, dict):
        raise ConfigError(fname, key, value, 'a mapping such as {directory: "./public"}')
    for name in value:
        if name not in ASSETS_KEYS:
            raise ConfigError(fname, f"{key}.{name}", name, "one of " + ", ".join(ASSETS_KEYS))
    directory = value.get("directory")
    if not isinstance(directory, str) or not directory:
        raise ConfigError(
            fname, f"{key}.directory", directory, "the path of the assets directory (a string)"
        )
    path = (root / directory).resolve()
    if not path.is_dir():
        raise ConfigError(
            fname, f"{key}.directory", directory, f"an existing directory (relative to {root})"
        )
    binding = value.get("binding")
    if binding is not None and (
        not isinstance(binding, str) or not binding.isidentifier() or binding.startswith("__")
    ):
        raise ConfigError(
            fname, f"{key}.binding", binding, "a binding name such as 'ASSETS' (an identifier)"
        )
    html = _choice(value, "html_handling", HTML_HANDLING, fname, key)
    not_found = _choice(value, "not_found_handling", NOT_FOUND_HANDLING, fname, key)
    first = value.get("run_worker_first", False)
    if isinstance(first, bool):
        return AssetsConfig(path, binding, html, not_found, run_worker_first=first)
    if not isinstance(first, list) or not all(isinstance(rule, str) for rule in first):
        raise ConfigError(
            fname,
            f"{key}.run_worker_first",
            first,
            'true, false or a list of path rules such as ["/api/*", "!/api/docs/*"]',
        )
    worker_rules, asset_rules = routing_rules(first, fname, f"{key}.run_worker_first")
    return AssetsConfig(
        path, binding, html, not_found, worker_rules=worker_rules, asset_rules=asset_rules
    )


def _choice(
    value: dict[str, object], name: str, allowed: tuple[str, ...], fname: str, key: str
) -> str:
    found = value.get(name, allowed[0])
    if found not in allowed:
        raise ConfigError(fname, f"{key}.{name}", found, "one of " + ", ".join(allowed))
    return str(found)


def routing_rules(
    rules: list[str], fname: str, key: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``run_worker_first``'s list split into (worker rules, asset rules), or a ConfigError
    listing every bad rule, in the platform's words."""
    if not rules:
        raise ConfigError(fname, key, rules, "at least one rule (or true / false)")
    if len(rules) > MAX_ROUTES_RULES:
        raise ConfigError(fname, key, f"{len(rules)} rules", f"at most {MAX_ROUTES_RULES}")
    worker: list[str] = []
    assets: list[str] = []
    invalid: list[str] = []
    for rule in rules:
        if rule.startswith("!/"):
            assets.append(rule[1:])
        elif rule.startswith("/"):
            worker.append(rule)
        elif rule.startswith("!"):
            invalid.append(f"'{rule}': negative rules must start with '!/'")
        else:
            invalid.append(f"'{rule}': rules must start with '/' or '!/'")
    if assets and not worker:
        raise ConfigError(fname, key, rules, "at least one rule that is not a '!/' negation")
    invalid += _redundant(worker) + _redundant(["!" + rule for rule in assets])
    if invalid:
        raise ConfigError(fname, key, rules, "valid rules: " + "; ".join(invalid))
    return tuple(worker), tuple(assets)


def _redundant(rules: list[str]) -> list[str]:
    invalid: list[str] = []
    seen: set[str] = set()
    for rule in rules:
        if len(rule) > MAX_ROUTES_RULE_LENGTH:
            invalid.append(f"'{rule}': rules must be at most {MAX_ROUTES_RULE_LENGTH} characters")
        if rule in seen:
            invalid.append(f"'{rule}': rule is a duplicate; rules must be unique")
        if rule.endswith("*"):
            invalid.extend(
                f"'{other}': rule '{rule}' makes it redundant"
                for other in rules
                if other != rule and other.startswith(rule[:-1])
            )
        seen.add(rule)
    return invalid
