"""The registry of binding types: config sections in, ``BindingSpec`` values out.

Built-in types are named as ``"module:attr"`` and imported when a registry is built, so a new
binding type is one new module: ``ember/bindings/ai/__init__.py`` exporting ``BINDING_TYPE``
replaces the placeholder below without any edit here or in ``ember/runtime``. Until it exists, a
configured ``ai`` binding gets a client whose ``run()`` says the model service is not configured.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence

from ember.bindings.base import BindingSpec, BindingType, import_target
from ember.config import ConfigSection
from ember.config_keys import BINDING_KEYS
from ember.errors import ConfigError

# config key -> candidates, first importable wins.
BUILTIN_TYPES: dict[str, tuple[str, ...]] = {
    "kv_namespaces": ("ember.bindings.kv.spec:BINDING_TYPE",),
    "ai": ("ember.bindings.ai:BINDING_TYPE", "ember.bindings.unavailable:AI_BINDING_TYPE"),
    "assets": ("ember.bindings.assets.spec:BINDING_TYPE",),
}


class BindingRegistry:
    """Known binding types, by config key and by kind."""

    def __init__(self, types: Iterable[BindingType]) -> None:
        self._by_key: dict[str, BindingType] = {}
        self._by_kind: dict[str, BindingType] = {}
        for binding_type in types:
            self.register(binding_type)

    def register(self, binding_type: BindingType) -> None:
        """Add a type; its config key and kind must be new."""
        if binding_type.config_key in self._by_key or binding_type.kind in self._by_kind:
            raise ValueError(f"binding type {binding_type.kind!r} is already registered")
        self._by_key[binding_type.config_key] = binding_type
        self._by_kind[binding_type.kind] = binding_type

    def replace(self, binding_type: BindingType) -> None:
        """Swap the type registered under ``binding_type``'s kind and config key (a platform
        wrapping a service with its own checks)."""
        old = self._by_kind[binding_type.kind]
        if old.config_key != binding_type.config_key:
            raise ValueError(f"binding type {binding_type.kind!r} keeps its config key")
        self._by_key[binding_type.config_key] = binding_type
        self._by_kind[binding_type.kind] = binding_type

    def by_kind(self, kind: str) -> BindingType:
        """The type for ``kind``; KeyError if unknown."""
        return self._by_kind[kind]

    @property
    def types(self) -> tuple[BindingType, ...]:
        """Every registered type."""
        return tuple(self._by_kind.values())

    @property
    def config_keys(self) -> tuple[str, ...]:
        """Supported config keys, sorted."""
        return tuple(sorted(self._by_key))

    def ignored(self, sections: Sequence[ConfigSection]) -> list[str]:
        """Keys of sections that are neither registered nor known binding types (ignored)."""
        return [s.key for s in sections if s.key not in self._by_key and s.key not in BINDING_KEYS]

    def parse(self, sections: Sequence[ConfigSection]) -> tuple[BindingSpec, ...]:
        """Turn a project's raw binding sections into specs; names must be unique."""
        self._refuse_unsupported(sections)
        specs: list[BindingSpec] = []
        seen: dict[str, str] = {}
        for section in sections:
            binding_type = self._by_key.get(section.key)
            if binding_type is None:
                continue  # not a binding at all: reported by ``ignored``
            try:
                parsed = binding_type.parse(section)
            except ConfigError as exc:
                raise section.relocate(exc) from None
            for spec in parsed:
                if spec.name in seen:
                    raise ConfigError(
                        section.file,
                        section.path,
                        spec.name,
                        f"a binding name not already used by {seen[spec.name]}",
                    )
                seen[spec.name] = section.key
                specs.append(spec)
        return tuple(specs)

    def _refuse_unsupported(self, sections: Sequence[ConfigSection]) -> None:
        """One ConfigError naming every binding type wrangler knows and ember does not run (a
        config with several would otherwise be fixed one start at a time)."""
        unsupported = [s for s in sections if s.key not in self._by_key and s.key in BINDING_KEYS]
        if not unsupported:
            return
        supported = ", ".join(self.config_keys)
        if len(unsupported) == 1:
            section = unsupported[0]
            raise ConfigError(
                section.file,
                section.path,
                section.key,
                f"a supported binding type: {supported}",
                hint="ember does not emulate this binding type yet",
            )
        raise ConfigError(
            unsupported[0].file,
            ", ".join(s.path for s in unsupported),
            [s.key for s in unsupported],
            f"supported binding types: {supported}",
            hint="ember does not emulate these binding types yet",
        )


def default_registry(extra: Iterable[BindingType] = ()) -> BindingRegistry:
    """The built-in types (first importable candidate per config key), plus ``extra``."""
    types: list[BindingType] = []
    for candidates in BUILTIN_TYPES.values():
        for target in candidates:
            module_name = target.split(":")[0]
            if _module_exists(module_name):
                types.append(import_target(target))
                break
    types.extend(extra)
    return BindingRegistry(types)


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
