"""Per-field limits of what a Worker version stores besides its modules, and its stored bytes.

Every version stores its upload's metadata (compatibility flags, bindings with their vars,
annotations, ``observability``, ``placement``, ``tags`` ...) and its secrets, copied again by
every redeploy and secret change. Only module bytes were bounded: 20 uploads with a 60 MiB
``observability`` value grew platform.db past a 1 GiB cap. So each field is bounded here, and
``stored_bytes`` (modules, metadata and secrets) is what the account's
``max_stored_script_bytes`` counts (``retention.py``).

Cloudflare's numbers where it publishes them (workers-api.md §5.1): a var or secret is at most
5 KB (10054), a Worker has at most 64 (Free) / 128 (Paid) vars and secrets together (10055);
temporary accounts get the Free number, permanent ones the Paid one. Where Cloudflare publishes
none, ember picks generous ones and names them in the error and in docs/serve.md: 100 compatibility
flags of at most 128 characters, 8 tags (Workers for Platforms' count) of at most 128
characters, 16 KiB of JSON for each other metadata field (``metadata.assets`` without the
``_redirects`` and ``_headers`` texts, bounded by ``rules.MAX_RULES_FILE_BYTES`` each).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgpack

from ember.runtime.deployments.errors import InvalidUpload, TooManyVars, VarTooLarge
from ember.runtime.deployments.records import Binding, Module, SecretValue
from ember.runtime.fields import MAX_FRAME_BYTES
from ember.wirejson import json_size

MAX_VAR_BYTES = 5 * 1024  # each plain_text / json var and secret (Cloudflare: 5 KB, 10054)
MAX_VARS = 128  # vars and secrets per Worker, permanent accounts (Cloudflare Paid, 10055)
MAX_VARS_TEMPORARY = 64  # the same for temporary accounts (Cloudflare Free)
MAX_COMPATIBILITY_FLAGS = 100  # ember's: Cloudflare publishes no count
MAX_FLAG_CHARS = 128  # ember's; Cloudflare's longest flag names are under 60
MAX_TAGS = 8  # Cloudflare's per-script tag count (Workers for Platforms)
MAX_TAG_CHARS = 128  # ember's
MAX_METADATA_FIELD_BYTES = 16 * 1024  # ember's: JSON of each other field (observability, ...)
RULE_FILE_KEYS = ("_redirects", "_headers")  # in metadata.assets.config: limits of their own
MAX_BINDING_NAME = 128  # ember's: characters of a binding's or secret's name (an identifier)
# The worker gets its bindings, vars, secrets and flags in one Init frame: what they take must
# fit it, with room left for the rest (ids, paths, the project's requirements).
INIT_BUDGET = MAX_FRAME_BYTES - 64 * 1024
VAR_TYPES = ("plain_text", "json")


def init_bytes(value: Any) -> int:
    """Bytes of ``value`` in an Init frame (msgpack, as ``protocol.encode`` packs it)."""
    return len(msgpack.packb(value, use_bin_type=True))


def check_flags(flags: tuple[str, ...]) -> None:
    if len(flags) > MAX_COMPATIBILITY_FLAGS:
        raise InvalidUpload(
            f"metadata.compatibility_flags has {len(flags):,} flags; ember takes at most "
            f"{MAX_COMPATIBILITY_FLAGS}"
        )
    for flag in flags:
        if not flag or len(flag) > MAX_FLAG_CHARS:
            raise InvalidUpload(
                f"metadata.compatibility_flags: {flag[:64]!r} must be 1 to {MAX_FLAG_CHARS} "
                "characters"
            )


def check_extra(extra: dict[str, Any]) -> None:
    """The other metadata fields stored with the version: ``tags`` as Cloudflare bounds them,
    each field's JSON within ``MAX_METADATA_FIELD_BYTES``."""
    tags = extra.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InvalidUpload("metadata.tags must be a list of strings")
        if len(tags) > MAX_TAGS:
            raise InvalidUpload(
                f"metadata.tags has {len(tags):,} tags; a Worker has at most {MAX_TAGS}"
            )
        for tag in tags:
            if len(tag) > MAX_TAG_CHARS:
                raise InvalidUpload(
                    f"metadata.tags: {tag[:64]!r} is longer than {MAX_TAG_CHARS} characters"
                )
    for key, value in extra.items():
        size = json_size(_without_rule_texts(value) if key == "assets" else value)
        if size > MAX_METADATA_FIELD_BYTES:
            raise InvalidUpload(
                f"metadata.{key} is {size:,} bytes of JSON; ember stores at most "
                f"{MAX_METADATA_FIELD_BYTES:,} bytes for each metadata field"
            )


def _without_rule_texts(assets: Any) -> Any:
    """``metadata.assets`` without the ``_redirects`` / ``_headers`` texts in its config: they
    have limits of their own, sized from the rule limits (``asset_manifest.parse_config``
    names the file past them)."""
    config = assets.get("config") if isinstance(assets, dict) else None
    if not isinstance(config, dict):
        return assets
    rest = {k: v for k, v in config.items() if k not in RULE_FILE_KEYS or not isinstance(v, str)}
    return {**assets, "config": rest}


def check_binding_size(spec: dict[str, Any]) -> None:
    """A var's or secret's value within 5 KiB (10054); any other binding's JSON within
    ``MAX_METADATA_FIELD_BYTES`` (its extra keys are stored too). Never echoes a value."""
    name, kind = spec["name"], spec["type"]
    if kind in ("plain_text", "secret_text"):
        size = len(spec["text"].encode("utf-8", "surrogatepass"))
    elif kind == "json":
        size = json_size(spec["json"])
    else:
        size = json_size(spec)
        if size > MAX_METADATA_FIELD_BYTES:
            raise InvalidUpload(
                f"binding {name!r} is {size:,} bytes of JSON; ember stores at most "
                f"{MAX_METADATA_FIELD_BYTES:,} bytes for each binding"
            )
        return
    if size > MAX_VAR_BYTES:
        what = "secret" if kind == "secret_text" else "variable"
        raise VarTooLarge(
            f"{what} {name!r} is {size:,} bytes; a variable or secret is at most "
            f"{MAX_VAR_BYTES:,} bytes"
        )


def check_var_count(vars_and_secrets: int, temporary: bool) -> None:
    """TooManyVars past the tier's count of vars and secrets on one Worker."""
    limit = MAX_VARS_TEMPORARY if temporary else MAX_VARS
    if vars_and_secrets > limit:
        scope = "on a temporary account" if temporary else "on this platform"
        raise TooManyVars(
            f"this version would have {vars_and_secrets} variables and secrets; a Worker "
            f"{scope} has at most {limit} (plain_text, json and secret_text bindings together). "
            "Remove variables from the config or delete secrets (`ember secret delete NAME`: "
            "a change that removes some is accepted even while the Worker is over the limit), "
            "or keep such values in KV"
        )


def check_init_size(
    bindings: tuple[Binding, ...], secrets: tuple[SecretValue, ...], flags: tuple[str, ...]
) -> None:
    """InvalidUpload when the version's bindings, vars, secrets and flags would not fit the
    worker's Init frame (each within its own limit, but many together): checked before the
    version is stored, since a version that cannot start must never go live. Measured in the
    frame's own encoding (msgpack), not JSON: a float such as ``0.5`` is 3 bytes of JSON and 9
    of msgpack, so a JSON bound let a version through whose Init could not be sent."""
    size = init_size(bindings, secrets, flags)
    if size > INIT_BUDGET:
        raise InvalidUpload(
            f"this version's bindings, variables, secrets and compatibility flags take {size:,} "
            f"bytes together; a worker's Init frame carries at most {INIT_BUDGET:,} bytes of "
            "them. Remove some, or keep large values in KV"
        )


def init_size(
    bindings: tuple[Binding, ...], secrets: tuple[SecretValue, ...], flags: tuple[str, ...]
) -> int:
    """What ``check_init_size`` measures."""
    return init_bytes(
        [[[b.name, b.type, b.config] for b in bindings], [[s.name, s.value] for s in secrets]]
        + [list(flags)]
    )


def check_name(name: str, what: str) -> str | None:
    """Why ``name`` cannot name a binding or secret (None: it can): an identifier (the worker
    reads it as ``env.NAME``) of 1 to ``MAX_BINDING_NAME`` characters. Never echoes it whole."""
    if not 1 <= len(name) <= MAX_BINDING_NAME:
        return (
            f"{what} name {name[:40]!r}... ({len(name):,} characters) must be 1 to "
            f"{MAX_BINDING_NAME} characters"
            if name
            else f"{what} name must be 1 to {MAX_BINDING_NAME} characters"
        )
    return None


def stored_bytes(
    modules: Iterable[Module], texts: Iterable[str], secrets: Iterable[SecretValue]
) -> int:
    """What a version stores: its modules (name, type, content), its metadata as stored
    (``texts``: the JSON columns) and its secrets (name, type, value), in UTF-8 bytes."""

    def size(text: str) -> int:
        return len(text.encode("utf-8", "surrogatepass"))

    total = sum(len(m.content) + size(m.name) + size(m.content_type) for m in modules)
    total += sum(size(t) for t in texts)
    return total + sum(size(s.name) + size(s.type) + size(s.value) for s in secrets)
