"""Records -> the JSON shapes Cloudflare's clients read (cloudflare-api.md §2, §5, §6, §8)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ember.runtime.deployments.assets import version_assets
from ember.runtime.deployments.records import (
    Account,
    Deployment,
    KVNamespace,
    Script,
    Version,
)


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def account(a: Account) -> dict[str, Any]:
    return {
        "id": a.id,
        "name": a.name,
        "type": "standard",
        "created_on": iso(a.created_at),
        "settings": {},
        "ember": {"kind": a.kind, "expires_at": iso(a.expires_at)},
    }


def bindings(version: Version) -> list[dict[str, Any]]:
    """Bindings as the API shows them: secrets by name and type only, never their value."""
    out = [b.to_api() for b in version.bindings]
    out += [{"name": name, "type": kind} for name, kind in version.secret_names]
    return sorted(out, key=lambda b: b["name"])


def script(s: Script, live: Version | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": s.name,
        "tag": s.id,
        "tags": s.settings.get("tags", []),
        "etag": live.etag if live else None,
        "handlers": ["fetch"],
        "created_on": iso(s.created_on),
        "modified_on": iso(s.modified_on),
        "usage_model": "standard",
        "has_modules": True,
        "has_assets": live is not None and version_assets(live) is not None,
        "logpush": False,
        "last_deployed_from": s.last_deployed_from,
    }
    if live is not None:
        result["compatibility_date"] = live.compatibility_date or ""
        result["compatibility_flags"] = list(live.compatibility_flags)
        result["deployment_id"] = live.id
    return result


def service(s: Script, live: Version | None) -> dict[str, Any]:
    return {
        "id": s.name,
        "created_on": iso(s.created_on),
        "modified_on": iso(s.modified_on),
        "default_environment": {
            "environment": "production",
            "created_on": iso(s.created_on),
            "modified_on": iso(s.modified_on),
            "script": script(s, live),
        },
    }


def version(v: Version, account_: Account, script_: Script) -> dict[str, Any]:
    return {
        "id": v.id,
        "number": v.number,
        "metadata": {
            "author_email": account_.email,
            "author_id": account_.id,
            "created_on": iso(v.created_on),
            "modified_on": iso(v.created_on),
            "source": v.source,
            "hasPreview": False,
        },
        "annotations": v.annotations,
        "resources": {
            "bindings": bindings(v),
            "script": {
                "etag": v.etag,
                "handlers": ["fetch"],
                "last_deployed_from": script_.last_deployed_from,
            },
            "script_runtime": {
                "compatibility_date": v.compatibility_date or "",
                "compatibility_flags": list(v.compatibility_flags),
                "usage_model": "standard",
                "limits": v.metadata.get("limits", {}),
            },
        },
    }


def deployment(d: Deployment) -> dict[str, Any]:
    return {
        "id": d.id,
        "source": d.source,
        "strategy": d.strategy,
        "author_email": d.author_email,
        "created_on": iso(d.created_on),
        "annotations": d.annotations,
        "versions": [{"version_id": t.version_id, "percentage": t.percentage} for t in d.versions],
    }


def settings(s: Script, live: Version | None) -> dict[str, Any]:
    extra = live.metadata if live else {}
    return {
        "bindings": bindings(live) if live else [],
        "compatibility_date": live.compatibility_date if live else None,
        "compatibility_flags": list(live.compatibility_flags) if live else [],
        "logpush": bool(extra.get("logpush", False)),
        "placement": extra.get("placement", {}),
        "tail_consumers": extra.get("tail_consumers", []),
        "usage_model": "standard",
        "limits": extra.get("limits", {}),
        "tags": s.settings.get("tags", []),
        "observability": s.settings.get("observability", extra.get("observability")),
    }


def namespace(n: KVNamespace) -> dict[str, Any]:
    return {"id": n.id, "title": n.title, "supports_url_encoding": True, "beta": False}
