"""``ember kv namespace ...`` and ``ember kv key ...``: KV on an ember platform, over its API.

The same calls wrangler makes with ``--remote``. A namespace is named by ``--namespace-id``, or by
``--binding NAME`` of the worker project here: its configured id, or for a binding provisioned at
deploy time (no id in the config), the namespace the live version is bound to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import quote

import click

from ember.cli.environment import chosen_env, with_env_option
from ember.cli.session import Session, open_session, platform_option
from ember.errors import UserError

binding_option = with_env_option(
    click.option("--binding", metavar="NAME", help="A KV binding of the project here.")
)
namespace_option = click.option("--namespace-id", metavar="ID", help="The namespace's id.")


@click.group()
def kv() -> None:
    """Manage KV namespaces and keys on an ember platform."""


@kv.group()
def namespace() -> None:
    """Create, list, rename and delete KV namespaces."""


@namespace.command("create")
@click.argument("title")
@platform_option
def create_namespace(title: str, platform_url: str | None) -> None:
    """Create a namespace called TITLE and print its id."""
    with _session(platform_url) as session:
        created = session.client.call(
            "POST", session.account_path("/storage/kv/namespaces"), json={"title": title}
        )
    click.echo(f"Created KV namespace {created['title']!r} with id {created['id']}")


@namespace.command("list")
@platform_option
def list_namespaces(platform_url: str | None) -> None:
    """List the account's namespaces as JSON."""
    with _session(platform_url) as session:
        found = session.client.call(
            "GET", session.account_path("/storage/kv/namespaces?per_page=1000")
        )
    click.echo(json.dumps([{"id": n["id"], "title": n["title"]} for n in found], indent=2))


@namespace.command("rename")
@click.argument("namespace_id")
@click.argument("title")
@platform_option
def rename_namespace(namespace_id: str, title: str, platform_url: str | None) -> None:
    """Give namespace NAMESPACE_ID a new TITLE."""
    with _session(platform_url) as session:
        session.client.call(
            "PUT",
            session.account_path(f"/storage/kv/namespaces/{namespace_id}"),
            json={"title": title},
        )
    click.echo(f"Renamed KV namespace {namespace_id} to {title!r}")


@namespace.command("delete")
@click.argument("namespace_id")
@platform_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete_namespace(namespace_id: str, platform_url: str | None, yes: bool) -> None:
    """Delete namespace NAMESPACE_ID and every key in it."""
    if not yes:
        click.confirm(f"Delete KV namespace {namespace_id} and all its keys?", abort=True)
    with _session(platform_url) as session:
        session.client.call(
            "DELETE", session.account_path(f"/storage/kv/namespaces/{namespace_id}")
        )
    click.echo(f"Deleted KV namespace {namespace_id}")


@kv.group()
def key() -> None:
    """Write, read, list and delete keys."""


@key.command("put")
@click.argument("name")
@click.argument("value", required=False)
@click.option(
    "--path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Read the value from this file.",
)
@click.option("--metadata", metavar="JSON", help="Arbitrary JSON stored with the key.")
@click.option("--ttl", type=int, metavar="SECONDS", help="Expire the key after this long (>= 60).")
@click.option("--expiration", type=int, metavar="EPOCH", help="Expire the key at this time.")
@binding_option
@namespace_option
@platform_option
def put(
    name: str,
    value: str | None,
    path: Path | None,
    metadata: str | None,
    ttl: int | None,
    expiration: int | None,
    binding: str | None,
    namespace_id: str | None,
    platform_url: str | None,
) -> None:
    """Write VALUE (or --path's contents) to key NAME."""
    if (value is None) == (path is None):
        raise UserError("give the value as an argument or with --path FILE (one of the two)")
    data = path.read_bytes() if path is not None else (value or "").encode()
    params = {k: v for k, v in (("expiration_ttl", ttl), ("expiration", expiration)) if v}
    with _session(platform_url) as session:
        url = _values_path(session, binding, namespace_id, name)
        if metadata is not None:
            try:
                json.loads(metadata)
            except ValueError as exc:
                raise UserError(f"--metadata must be JSON: {exc}") from None
            files = {
                "value": ("upload", data, "application/octet-stream"),
                "metadata": (None, metadata, "application/json"),
            }
            session.client.call("PUT", url, params=params, files=files)
        else:
            session.client.call("PUT", url, params=params, content=data)
    click.echo(f"Wrote {len(data)} bytes to key {name!r}")


@key.command("get")
@click.argument("name")
@binding_option
@namespace_option
@platform_option
def get(name: str, binding: str | None, namespace_id: str | None, platform_url: str | None) -> None:
    """Print the value of key NAME (raw bytes, no newline added)."""
    with _session(platform_url) as session:
        response = session.client.raw("GET", _values_path(session, binding, namespace_id, name))
    if response.status_code == 404:
        raise UserError(f"key {name!r} not found")
    if response.status_code >= 400:
        raise UserError(_error_text(response))
    sys.stdout.buffer.write(response.content)
    sys.stdout.flush()


@key.command("list")
@click.option("--prefix", default="", help="Only keys starting with this.")
@binding_option
@namespace_option
@platform_option
def list_keys(
    prefix: str, binding: str | None, namespace_id: str | None, platform_url: str | None
) -> None:
    """List the keys (as JSON), following cursors to the end."""
    keys: list[object] = []
    with _session(platform_url) as session:
        base = f"/storage/kv/namespaces/{_namespace(session, binding, namespace_id)}/keys"
        cursor = ""
        while True:
            params = {"prefix": prefix, **({"cursor": cursor} if cursor else {})}
            response = session.client.raw("GET", session.account_path(base), params=params)
            body = response.json()
            if not body.get("success"):
                raise UserError(_error_text(response))
            keys += body["result"]
            cursor = (body.get("result_info") or {}).get("cursor") or ""
            if not cursor:
                break
    click.echo(json.dumps(keys, indent=2))


@key.command("delete")
@click.argument("name")
@binding_option
@namespace_option
@platform_option
def delete(
    name: str, binding: str | None, namespace_id: str | None, platform_url: str | None
) -> None:
    """Delete key NAME."""
    with _session(platform_url) as session:
        session.client.call("DELETE", _values_path(session, binding, namespace_id, name))
    click.echo(f"Deleted key {name!r}")


class _session:
    """``with _session(url) as session``: an authenticated session, closed afterwards."""

    def __init__(self, platform_url: str | None) -> None:
        self.session = open_session(platform_url)

    def __enter__(self) -> Session:
        return self.session

    def __exit__(self, *exc: object) -> None:
        self.session.close()


def _values_path(session: Session, binding: str | None, namespace_id: str | None, key: str) -> str:
    ns = _namespace(session, binding, namespace_id)
    return session.account_path(f"/storage/kv/namespaces/{ns}/values/{quote(key, safe='')}")


def _namespace(session: Session, binding: str | None, namespace_id: str | None) -> str:
    if (binding is None) == (namespace_id is None):
        raise UserError("name the namespace with --binding NAME or --namespace-id ID (one)")
    if namespace_id is not None:
        return namespace_id
    from ember.cli.worker_project import load_project

    project = load_project(Path("."), None, chosen_env().name)
    entry = next((b for b in project.kv_namespaces if b.binding == binding), None)
    if entry is None:
        names = ", ".join(b.binding for b in project.kv_namespaces) or "none"
        raise UserError(
            f"{project.config_file.name} has no KV binding {binding!r} (its KV bindings: {names})"
        )
    if entry.id:
        return entry.id
    settings = session.client.call(
        "GET", session.account_path(f"/workers/scripts/{project.name}/settings")
    )
    for item in settings.get("bindings", []):
        if item.get("name") == binding and item.get("type") == "kv_namespace":
            return str(item["namespace_id"])
    raise UserError(
        f"binding {binding!r} has no namespace id in the config and worker {project.name!r} "
        "has no live version bound to one: deploy it first, or pass --namespace-id"
    )


def _error_text(response: object) -> str:
    try:
        error = response.json()["errors"][0]  # type: ignore[attr-defined]
        return f"{error['message']} [code: {error['code']}]"
    except (ValueError, KeyError, IndexError, TypeError):
        return f"HTTP {response.status_code}"  # type: ignore[attr-defined]
