"""The multipart body of a worker upload, built from an ``UploadPlan``: the same for ``ember
deploy`` (``PUT .../scripts/{name}`` or ``POST .../versions``) and a versions upload.

The metadata is what wrangler sends (cloudflare-api.md §2.2): ``main_module``, the bindings,
the compatibility date and flags, ``keep_bindings`` (secrets always; vars too with
``--keep-vars``), the ``workers/message`` / ``workers/tag`` annotations, and the config's
``limits`` (``cpu_ms``, ``subrequests``) the platform enforces for this version.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from ember.cli.upload_options import UploadPlan
from ember.cli.worker_project import KVBinding
from ember.runtime.deployments.multipart import Part, build_multipart

KVResolver = Callable[[KVBinding], dict[str, Any]]


def binding_specs(plan: UploadPlan, resolve_kv: KVResolver) -> list[dict[str, Any]]:
    """The metadata's bindings: vars (config, then ``--var``), KV, AI, then the secrets file's
    secrets. A secret replaces a var of the same name, as in wrangler (one binding per name).
    ``resolve_kv`` turns a KV binding into its spec (an id, ``inherit``, a new namespace)."""
    project = plan.project
    out: list[dict[str, Any]] = []
    for key, value in project.vars.items():
        if key in plan.secrets:
            continue
        if isinstance(value, str):
            out.append({"name": key, "type": "plain_text", "text": value})
        else:
            out.append({"name": key, "type": "json", "json": value})
    out += [resolve_kv(kv) for kv in project.kv_namespaces]
    if project.ai_binding:
        out.append({"name": project.ai_binding, "type": "ai"})
    if project.assets is not None and project.assets.binding:
        out.append({"name": project.assets.binding, "type": "assets"})
    out += [{"name": k, "type": "secret_text", "text": v} for k, v in plan.secrets.items()]
    return out


def kv_spec(binding: str, namespace_id: str | None) -> dict[str, Any]:
    """A ``kv_namespace`` binding (without an id only in a dry run's table)."""
    spec: dict[str, Any] = {"name": binding, "type": "kv_namespace"}
    if namespace_id:
        spec["namespace_id"] = namespace_id
    return spec


def upload_body(
    plan: UploadPlan,
    modules: list[Part],
    specs: list[dict[str, Any]],
    assets: dict[str, Any] | None = None,
) -> tuple[bytes, dict[str, str]]:
    """The multipart body (metadata first, then the modules, entry first) and its headers;
    ``assets``: ``metadata.assets`` (the completion token of the files' upload, and config)."""
    project = plan.project
    if not modules:  # assets only, as wrangler uploads one: the metadata alone
        return _assets_only_body(plan, assets)
    metadata: dict[str, Any] = {
        "main_module": modules[0].name,
        "bindings": specs,
        "compatibility_date": project.compatibility_date,
        "compatibility_flags": list(project.compatibility_flags),
        "keep_bindings": plan.keep_bindings,
    }
    if plan.annotations:
        metadata["annotations"] = dict(plan.annotations)
    if project.limits:
        metadata["limits"] = dict(project.limits)
    if assets is not None:
        metadata["assets"] = assets
    boundary = "----ember-" + secrets.token_hex(12)
    body = build_multipart(
        [Part("metadata", None, None, json.dumps(metadata).encode()), *modules], boundary
    )
    return body, {"content-type": f"multipart/form-data; boundary={boundary}"}


def _assets_only_body(
    plan: UploadPlan, assets: dict[str, Any] | None
) -> tuple[bytes, dict[str, str]]:
    project = plan.project
    metadata: dict[str, Any] = {
        "assets": assets,
        "compatibility_date": project.compatibility_date,
        "compatibility_flags": list(project.compatibility_flags),
    }
    if plan.annotations:
        metadata["annotations"] = dict(plan.annotations)
    boundary = "----ember-" + secrets.token_hex(12)
    body = build_multipart([Part("metadata", None, None, json.dumps(metadata).encode())], boundary)
    return body, {"content-type": f"multipart/form-data; boundary={boundary}"}
