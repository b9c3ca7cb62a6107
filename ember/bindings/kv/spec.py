"""The KV binding type: ``kv_namespaces = [{binding, id?, preview_id?}]`` -> specs."""

from __future__ import annotations

from ember.bindings.base import BindingSpec, BindingType, OptionValue, binding_name
from ember.config import ConfigSection

CLIENT = "ember.bindings.kv.client:KVNamespace"
SERVICE = "ember.bindings.kv.service:KVService"


def parse(section: ConfigSection) -> tuple[BindingSpec, ...]:
    """Each entry names a binding and (optionally) the namespace id it reads and writes.

    Without an id, the namespace is named after the binding, as ``wrangler dev`` does locally,
    and the spec says so (``default_id``): a deploy provisions a namespace for it instead.
    """
    if not isinstance(section.value, list):
        raise section.error(None, section.value, "a list of {binding, id} entries")
    specs = []
    for index, entry in enumerate(section.value):
        where = f"[{index}]"
        if not isinstance(entry, dict):
            raise section.error(where, entry, "a mapping such as {binding: KV, id: ...}")
        name = binding_name(section, entry, where)
        namespace_id = entry.get("id", name)
        if not isinstance(namespace_id, str) or not namespace_id:
            raise section.error(f"{where}.id", namespace_id, "a non-empty namespace id")
        preview_id = entry.get("preview_id")
        if preview_id is not None and not isinstance(preview_id, str):
            raise section.error(f"{where}.preview_id", preview_id, "a namespace id string")
        options: dict[str, OptionValue] = {"namespace_id": namespace_id}
        if "id" not in entry:
            options["default_id"] = True
        specs.append(BindingSpec(kind="kv_namespace", name=name, client=CLIENT, options=options))
    return tuple(specs)


BINDING_TYPE = BindingType(
    kind="kv_namespace",
    config_key="kv_namespaces",
    parse=parse,
    service=SERVICE,
    description="Workers KV namespace (SQLite under the state directory)",
)
