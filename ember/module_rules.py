"""Module rules: which files beside a Worker's entry are its modules, and of which type.

wrangler decides what a Worker uploads by *module rules* (workers-sdk
``packages/wrangler/src/deployment-bundle/rules.ts``, ``find-additional-modules.ts``), and so
does ember, for ``ember deploy`` and ``ember dev`` alike:

- a rule is a module type and globs (``[[rules]] type = "Text" globs = ["**/*.md"]``);
- the config's ``rules`` come first, then, for a ``.py`` entry, ``PythonModule`` for
  ``**/*.py`` (wrangler's ``applyPythonConfig``), then the defaults (``DEFAULT_RULES``);
- a rule shadows every later rule of its type unless it says ``fallthrough = true``
  (wrangler's ``parseRules``; shadowing a default without ``fallthrough = false`` warns);
- a file takes the type of the first rule with a glob that matches its name (relative to the
  module root, ``/``-separated); a file no rule matches is not a module.

Globs are matched as wrangler matches them (``glob-to-regexp`` with ``globstar``): ``*`` is any
run of characters but ``/``, ``**/`` is any number of directories (none included), and every
other character, ``?`` and ``[`` too, stands for itself.

This module also reads the keys that go with the rules: ``base_dir``,
``find_additional_modules`` and ``python_modules.exclude`` (``ModulesConfig``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ConfigError

# The types a config's rule may name: wrangler's config validation (workers-sdk
# packages/workers-utils/src/config/validation.ts, ``validateRule``) accepts these five.
RULE_TYPES = ("ESModule", "CommonJS", "CompiledWasm", "Text", "Data")
# The content type each module type is uploaded with (wrangler's create-worker-upload-form.ts).
CONTENT_TYPES = {
    "ESModule": "application/javascript+module",
    "CommonJS": "application/javascript",
    "CompiledWasm": "application/wasm",
    "Text": "text/plain",
    "Data": "application/octet-stream",
    "PythonModule": "text/x-python",
}
# python_modules.exclude when the config sets none (workers-utils config.ts defaults).
PYTHON_MODULES_EXCLUDE = ("**/*.pyc",)


@dataclass(frozen=True, slots=True)
class ModuleRule:
    """One rule: files whose names match one of ``globs`` are modules of ``type``."""

    type: str
    globs: tuple[str, ...]
    fallthrough: bool | None = None  # None: not written (shadowing a rule then warns)

    def matches(self, name: str) -> bool:
        """Whether module name ``name`` (``templates/page.html``) matches one of the globs."""
        return any(glob_matches(glob, name) for glob in self.globs)

    def describe(self) -> str:
        """The rule as wrangler's warnings print it (its JSON)."""
        data: dict[str, object] = {"type": self.type, "globs": list(self.globs)}
        if self.fallthrough is not None:
            data["fallthrough"] = self.fallthrough
        return json.dumps(data, separators=(",", ":"))


DEFAULT_RULES = (
    ModuleRule("Text", ("**/*.txt", "**/*.html", "**/*.sql")),
    ModuleRule("Data", ("**/*.bin",)),
    ModuleRule("CompiledWasm", ("**/*.wasm", "**/*.wasm?module")),
)
PYTHON_RULE = ModuleRule("PythonModule", ("**/*.py",))


@dataclass(frozen=True, slots=True)
class ModulesConfig:
    """The config's keys about modules, checked."""

    rules: tuple[ModuleRule, ...] = ()  # the config's own, in its order
    base_dir: Path | None = None  # the module root when set (else the entry's directory)
    find_additional_modules: bool = True  # False: the entry is the only module
    python_modules_exclude: tuple[str, ...] = PYTHON_MODULES_EXCLUDE


def first_rule(rules: tuple[ModuleRule, ...]) -> Callable[[str], ModuleRule | None]:
    """``lambda name: next((r for r in rules if r.matches(name)), None)``, with one compiled
    pattern per rule (ember dev's watcher asks it for every file of the module root per poll)."""
    patterns = [
        (re.compile("|".join(f"(?:{_glob_regex(g).pattern})" for g in r.globs)), r)
        for r in rules
        if r.globs
    ]

    def first(name: str) -> ModuleRule | None:
        return next((rule for pattern, rule in patterns if pattern.fullmatch(name)), None)

    return first


def glob_matches(glob: str, name: str) -> bool:
    """Whether ``name`` matches ``glob`` as wrangler's ``matchFiles`` matches it."""
    return _glob_regex(glob).fullmatch(name) is not None


@functools.lru_cache(maxsize=256)
def _glob_regex(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if char != "*":
            out.append(re.escape(char))
            i += 1
            continue
        start = i
        while i < len(glob) and glob[i] == "*":
            i += 1
        before = glob[start - 1] if start > 0 else "/"
        after = glob[i] if i < len(glob) else "/"
        if i - start > 1 and before == "/" and after == "/":
            out.append(r"(?:[^/]*(?:/|$))*")  # a globstar segment: any number of directories
            i += 1  # its "/" is part of it
        else:
            out.append(r"[^/]*")
    return re.compile("".join(out))


def parse_rules(user: tuple[ModuleRule, ...]) -> tuple[tuple[ModuleRule, ...], tuple[str, ...]]:
    """The rules in force for a Python entry, and wrangler's warnings about shadowed ones."""
    candidates = (*user, PYTHON_RULE, *DEFAULT_RULES)
    kept: list[ModuleRule] = []
    closing: dict[str, int] = {}  # type -> index of the rule that shadows the rest of its type
    shadowed: dict[str, list[int]] = {}
    for index, rule in enumerate(candidates):
        if rule.type in closing:
            if candidates[closing[rule.type]].fallthrough is None:
                shadowed.setdefault(rule.type, []).append(index)
            continue
        kept.append(rule)
        if rule.fallthrough is not True:
            closing[rule.type] = index
    warnings = []
    defaults_from = len(user) + 1
    for kind, indices in shadowed.items():
        first = closing[kind]
        lines = [
            f"The {'default ' if first >= defaults_from else ''}module rule "
            f"{candidates[first].describe()} does not have a fallback, the following rules "
            "will be ignored:"
        ]
        lines += [
            f" {candidates[i].describe()}{' (DEFAULT)' if i >= defaults_from else ''}"
            for i in indices
        ]
        lines.append(
            "\nAdd `fallthrough = true` to rule to allow next rule to be used or "
            "`fallthrough = false` to silence this warning"
        )
        warnings.append("\n".join(lines))
    return tuple(kept), tuple(warnings)


def rules_value(value: object, fname: str) -> tuple[ModuleRule, ...]:
    """The config's ``rules``, each checked: a known type, globs, an optional fallthrough."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(fname, "rules", value, 'a list of rules, such as [[rules]] type = "Text"')
    return tuple(_rule(item, fname, f"rules[{index}]") for index, item in enumerate(value))


def _rule(item: object, fname: str, key: str) -> ModuleRule:
    if not isinstance(item, Mapping):
        raise ConfigError(fname, key, item, 'a rule: {type = "Text", globs = ["**/*.md"]}')
    kind = item.get("type")
    if kind not in RULE_TYPES:
        raise ConfigError(fname, f"{key}.type", kind, "one of " + ", ".join(RULE_TYPES))
    globs = item.get("globs")
    if not isinstance(globs, list) or not globs:
        raise ConfigError(fname, f"{key}.globs", globs, 'a non-empty list of globs ("**/*.md")')
    for index, glob in enumerate(globs):
        # A module's name is relative to the module root: a glob that is absolute, empty or
        # climbs out of it can never match one, and would silently upload nothing.
        if not isinstance(glob, str) or not glob or glob.startswith("/") or ".." in glob.split("/"):
            raise ConfigError(
                fname, f"{key}.globs[{index}]", glob, "a glob relative to the module root"
            )
    fallthrough = item.get("fallthrough")
    if fallthrough is not None and not isinstance(fallthrough, bool):
        raise ConfigError(fname, f"{key}.fallthrough", fallthrough, "true or false")
    return ModuleRule(str(kind), tuple(globs), fallthrough)


def modules_value(data: Mapping[str, object], fname: str, root: Path) -> ModulesConfig:
    """``rules``, ``base_dir``, ``find_additional_modules`` and ``python_modules`` checked."""
    base_dir = None
    raw_base = data.get("base_dir")
    if raw_base is not None:
        # Relative to the config file, as wrangler resolves it; inside the project, so the
        # module names never climb out of what a deploy reads.
        base_dir = (root / raw_base).resolve() if isinstance(raw_base, str) and raw_base else None
        if base_dir is None or not base_dir.is_relative_to(root) or not base_dir.is_dir():
            raise ConfigError(fname, "base_dir", raw_base, "a directory inside the project")
    find = data.get("find_additional_modules", True)
    if not isinstance(find, bool):
        raise ConfigError(fname, "find_additional_modules", find, "true or false")
    exclude = PYTHON_MODULES_EXCLUDE
    python_modules = data.get("python_modules")
    if python_modules is not None:
        if not isinstance(python_modules, Mapping):
            raise ConfigError(fname, "python_modules", python_modules, "a mapping with 'exclude'")
        raw = python_modules.get("exclude", list(PYTHON_MODULES_EXCLUDE))
        if not isinstance(raw, list) or not all(isinstance(g, str) and g for g in raw):
            raise ConfigError(fname, "python_modules.exclude", raw, "a list of globs")
        exclude = tuple(raw)
    return ModulesConfig(rules_value(data.get("rules"), fname), base_dir, find, exclude)
