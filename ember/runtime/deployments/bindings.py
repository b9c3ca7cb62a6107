"""Binding specs: which types ember supports, their validation, and inheritance across versions.

A version's bindings are resolved from its upload plus the previous version: ``inherit`` copies a
binding by name (``bindings_inherit=strict`` makes a missing one an error), ``keep_bindings`` lists
types to carry over (wrangler always sends ``secret_text`` and ``secret_key`` so secrets survive a
deploy), ``keep_vars`` carries ``plain_text``/``json`` vars.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.runtime.deployments.errors import InvalidUpload, UnsupportedBinding
from ember.runtime.deployments.metadata_limits import (
    MAX_VAR_BYTES,
    check_binding_size,
    check_name,
)
from ember.runtime.deployments.records import Binding, SecretValue

# type -> the keys it requires (each must be a string unless noted in _validate_one)
SUPPORTED_TYPES: dict[str, tuple[str, ...]] = {
    "plain_text": ("text",),
    "secret_text": ("text",),
    "json": ("json",),
    "kv_namespace": ("namespace_id",),
    "ai": (),
    "assets": (),  # the version's static assets (metadata.assets)
    "version_metadata": (),
    "inherit": (),
}
SECRET_TYPES = frozenset({"secret_text"})
VAR_TYPES = frozenset({"plain_text", "json"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_BINDINGS = 256
MAX_SECRET_BYTES = MAX_VAR_BYTES  # Cloudflare's per-variable limit (workers-api.md §5.1)


def validate_binding_specs(specs: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(specs, list):
        raise InvalidUpload("metadata.bindings must be a list")
    if len(specs) > MAX_BINDINGS:
        raise InvalidUpload(f"too many bindings ({len(specs)} > {MAX_BINDINGS})")
    seen: set[str] = set()
    out = []
    for spec in specs:
        _validate_one(spec)
        if spec["name"] in seen:
            raise InvalidUpload(f"binding name {spec['name']!r} is used twice")
        seen.add(spec["name"])
        out.append(dict(spec))
    return tuple(out)


def _validate_one(spec: Any) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        # Never echo the spec: it may be a secret_text binding, and wrangler prints this
        # message into (CI) logs. Its type and keys say enough to find it.
        shape = (
            f"an object of type {spec.get('type')!r:.40} with keys {sorted(map(str, spec))}"
            if isinstance(spec, dict)
            else f"a JSON {type(spec).__name__}"
        )
        raise InvalidUpload(f"each binding must be an object with a string 'name', got {shape}")
    name, kind = spec["name"], spec.get("type")
    too_long = check_name(name, "binding")
    if too_long:
        raise InvalidUpload(too_long)
    if not _NAME.match(name):
        raise InvalidUpload(f"binding name {name!r} must be an identifier (letters, digits, _)")
    if kind not in SUPPORTED_TYPES:
        raise UnsupportedBinding(
            f"binding {name!r} has type {kind!r}, which ember does not support; supported "
            f"binding types: {', '.join(sorted(SUPPORTED_TYPES))}"
        )
    for key in SUPPORTED_TYPES[kind]:
        if key not in spec or (key != "json" and not isinstance(spec[key], str)):
            raise InvalidUpload(f"binding {name!r} of type {kind} needs a string {key!r}")
    # A var, or a secret uploaded with a version (wrangler deploy --secrets-file), meets the
    # limit that ``secret put`` enforces; the message names it, never its value.
    check_binding_size(spec)


@dataclass(frozen=True)
class PreviousVersion:
    """The bindings of the version an upload inherits from (and the version id asked for)."""

    version_id: str
    bindings: tuple[Binding, ...]
    secrets: tuple[SecretValue, ...]


def resolve_bindings(
    specs: tuple[dict[str, Any], ...],
    *,
    previous: Callable[[str], PreviousVersion | None],
    strict: bool,
    keep_types: tuple[str, ...],
    keep_vars: bool,
    namespace_exists: Callable[[str], bool],
) -> tuple[tuple[Binding, ...], tuple[SecretValue, ...]]:
    """Resolve an upload's binding specs into the bindings and secrets of the new version.

    ``previous(version_ref)`` returns the version to inherit from ("latest" or an id), or None.
    """
    bindings: dict[str, Binding] = {}
    secrets: dict[str, SecretValue] = {}
    for spec in specs:
        name, kind = spec["name"], spec["type"]
        if kind == "inherit":
            _inherit(spec, previous, strict, bindings, secrets)
        elif kind in SECRET_TYPES:
            secrets[name] = SecretValue(name, kind, spec["text"])
        else:
            if kind == "kv_namespace" and not namespace_exists(spec["namespace_id"]):
                raise InvalidUpload(
                    f"binding {name!r}: KV namespace {spec['namespace_id']!r} does not exist on "
                    "this account (create it first, or leave the id out to provision one)"
                )
            config = {k: v for k, v in spec.items() if k not in ("name", "type")}
            bindings[name] = Binding(name, kind, config)
    carried = set(keep_types) | (set(VAR_TYPES) if keep_vars else set())
    base = previous("latest") if carried else None
    if base is not None:
        for old in base.bindings:
            if old.type in carried and old.name not in bindings and old.name not in secrets:
                bindings[old.name] = old
        for secret in base.secrets:
            if (
                secret.type in carried
                and secret.name not in bindings
                and secret.name not in secrets
            ):
                secrets[secret.name] = secret
    return tuple(bindings.values()), tuple(secrets.values())


def _inherit(
    spec: dict[str, Any],
    previous: Callable[[str], PreviousVersion | None],
    strict: bool,
    bindings: dict[str, Binding],
    secrets: dict[str, SecretValue],
) -> None:
    name = spec["name"]
    old_name = spec.get("old_name", name)
    ref = spec.get("version_id", "latest")
    base = previous(ref) if isinstance(ref, str) else None
    old_binding = next((b for b in base.bindings if b.name == old_name), None) if base else None
    old_secret = next((s for s in base.secrets if s.name == old_name), None) if base else None
    if old_binding is not None:
        bindings[name] = Binding(name, old_binding.type, dict(old_binding.config))
    elif old_secret is not None:
        secrets[name] = SecretValue(name, old_secret.type, old_secret.value)
    elif strict and base is None:
        # Another worker's (or account's) version id is no version of this worker: say that,
        # not that "its" version lacks the binding, which would confirm the id exists.
        missing = "no previous version" if ref == "latest" else f"no version {ref!r}"
        raise InvalidUpload(
            f"binding {name!r} is 'inherit' but this worker has {missing} to inherit it from "
            "(bindings_inherit=strict)"
        )
    elif strict:
        where = "the previous version" if ref == "latest" else f"version {ref!r}"
        raise InvalidUpload(
            f"binding {name!r} is 'inherit' but {where} has no binding named {old_name!r} "
            "(bindings_inherit=strict)"
        )
