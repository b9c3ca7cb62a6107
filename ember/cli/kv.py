"""``ember kv namespace ...``, ``ember kv key ...`` (and ``ember kv bulk``, in ``kv_bulk.py``).

Namespaces live on an ember platform, over its API. Keys are **local** by default, as in wrangler
4: the SQLite state ``ember dev`` serves (``kv_local.py``); ``--remote`` makes the calls wrangler
makes with ``--remote``. Which namespace, and where, is decided in ``kv_target.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ember.cli.kv_bulk import bulk
from ember.cli.kv_snippet import INTRO, config_snippet
from ember.cli.kv_target import (
    KVTarget,
    NamespaceRef,
    echo_location,
    error_text,
    namespace_options,
    platform_session,
    values_path,
)
from ember.cli.prompts import confirm
from ember.cli.session import path_segment, platform_option
from ember.cli.temporary import temporary_option
from ember.errors import UserError


@click.group()
def kv() -> None:
    """Manage KV namespaces (on a platform) and keys (local to ember dev unless --remote)."""


@kv.group()
def namespace() -> None:
    """Create, list, rename and delete KV namespaces."""


@namespace.command("create")
@click.argument("title")
@platform_option
@temporary_option
def create_namespace(title: str, platform_url: str | None, temporary: bool) -> None:
    """Create a namespace called TITLE; print its id and the config snippet that binds it."""
    click.echo(f'Creating namespace with title "{title}"')
    with platform_session(platform_url, temporary) as session:
        created = session.client.call(
            "POST", session.account_path("/storage/kv/namespaces"), json={"title": title}
        )
    # wrangler's lines, so a script that reads the id out of wrangler's output reads ember's.
    click.echo("Success!")
    click.echo(INTRO)
    click.echo(config_snippet(created["title"], created["id"], Path.cwd()))


@namespace.command("list")
@platform_option
@temporary_option
def list_namespaces(platform_url: str | None, temporary: bool) -> None:
    """List the account's namespaces as JSON."""
    with platform_session(platform_url, temporary) as session:
        found = session.client.call(
            "GET", session.account_path("/storage/kv/namespaces?per_page=1000")
        )
    click.echo(json.dumps([{"id": n["id"], "title": n["title"]} for n in found], indent=2))


@namespace.command("rename")
@click.argument("namespace_id")
@click.argument("title")
@platform_option
@temporary_option
def rename_namespace(
    namespace_id: str, title: str, platform_url: str | None, temporary: bool
) -> None:
    """Give namespace NAMESPACE_ID a new TITLE."""
    with platform_session(platform_url, temporary) as session:
        session.client.call(
            "PUT",
            session.account_path(f"/storage/kv/namespaces/{path_segment(namespace_id)}"),
            json={"title": title},
        )
    click.echo(f"Renamed KV namespace {namespace_id} to {title!r}")


@namespace.command("delete")
@click.argument("namespace_id")
@platform_option
@temporary_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete_namespace(
    namespace_id: str, platform_url: str | None, temporary: bool, yes: bool
) -> None:
    """Delete namespace NAMESPACE_ID and every key in it."""
    if not yes:
        if not confirm(f"Delete KV namespace {namespace_id} and all its keys?"):
            raise click.Abort()
    with platform_session(platform_url, temporary) as session:
        session.client.call(
            "DELETE", session.account_path(f"/storage/kv/namespaces/{path_segment(namespace_id)}")
        )
    click.echo(f"Deleted KV namespace {namespace_id}")


@kv.group()
def key() -> None:
    """Write, read, list and delete keys (local unless --remote)."""


@key.command("put")
@click.argument("name")
@click.argument("value", required=False)
@click.option(
    "--path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Read the value from this file.",
)
@click.option("--metadata", metavar="JSON", help="A JSON object stored with the key.")
@click.option("--ttl", type=int, metavar="SECONDS", help="Expire the key after this long (>= 60).")
@click.option("--expiration", type=int, metavar="EPOCH", help="Expire the key at this time.")
@namespace_options
def put(
    name: str,
    value: str | None,
    path: Path | None,
    metadata: str | None,
    ttl: int | None,
    expiration: int | None,
    target: KVTarget,
) -> None:
    """Write VALUE (or --path's contents) to key NAME."""
    if (value is None) == (path is None):
        raise UserError("give the value as an argument or with --path FILE (one of the two)")
    data = path.read_bytes() if path is not None else (value or "").encode()
    meta = _metadata_option(metadata)
    echo_location(target.local)
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        _echo_writing(name, value, path, ref, meta)
        with open_local(target.store_path(), ref) as ns:
            ns.put(name, data, expiration=expiration, expiration_ttl=ttl, metadata=meta)
        return
    params = {k: v for k, v in (("expiration_ttl", ttl), ("expiration", expiration)) if v}
    with platform_session(target.platform_url, target.temporary) as session:
        ref = target.remote_ref(session)
        _echo_writing(name, value, path, ref, meta)
        url = values_path(session, ref, name)
        if meta is not None:
            files = {
                "value": ("upload", data, "application/octet-stream"),
                "metadata": (None, meta, "application/json"),
            }
            session.client.call("PUT", url, params=params, files=files)
        else:
            session.client.call("PUT", url, params=params, content=data)


def _metadata_option(metadata: str | None) -> str | None:
    """``--metadata`` as compact JSON text; wrangler takes only a JSON object."""
    if metadata is None:
        return None
    try:
        parsed = json.loads(metadata)
    except ValueError:
        raise UserError(f"--metadata must be valid JSON. Received: {metadata}") from None
    if not isinstance(parsed, dict):
        raise UserError(f"--metadata must be a JSON object. Received: {metadata}")
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)


def _echo_writing(
    name: str, value: str | None, path: Path | None, ref: NamespaceRef, meta: str | None
) -> None:
    with_meta = f' with metadata "{meta}"' if meta is not None else ""
    if path is not None:
        click.echo(
            f'Writing the contents of {path} to the key "{name}" on namespace '
            f"{ref.display}{with_meta}."
        )
    else:
        click.echo(
            f'Writing the value "{value}" to key "{name}" on namespace {ref.display}{with_meta}.'
        )


@key.command("get")
@click.argument("name")
@click.option("--text", is_flag=True, help="Decode the value as UTF-8 and end it with a newline.")
@namespace_options
def get(
    name: str,
    text: bool,
    target: KVTarget,
) -> None:
    """Print the value of key NAME (raw bytes, no newline added, unless --text)."""
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        with open_local(target.store_path(), ref) as ns:
            found = ns.get(name)
        if found is None:
            # wrangler's words; on stderr with exit status 1 (wrangler prints them on stdout and
            # exits 0), so a script can tell a missing key from one whose value is these words.
            raise UserError("Value not found")
    else:
        with platform_session(target.platform_url, target.temporary) as session:
            response = session.client.raw(
                "GET", values_path(session, target.remote_ref(session), name)
            )
        if response.status_code == 404:
            raise UserError(f"key {name!r} not found")
        if response.status_code >= 400:
            raise UserError(error_text(response))
        found = response.content
    if text:
        click.echo(found.decode("utf-8", "replace"))
        return
    sys.stdout.buffer.write(found)
    sys.stdout.flush()


@key.command("list")
@click.option("--prefix", default="", help="Only keys starting with this.")
@namespace_options
def list_keys(
    prefix: str,
    target: KVTarget,
) -> None:
    """List the keys (as JSON), following cursors to the end."""
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        with open_local(target.store_path(), ref) as ns:
            click.echo(json.dumps(ns.list(prefix), indent=2))
        return
    keys: list[object] = []
    with platform_session(target.platform_url, target.temporary) as session:
        ref = target.remote_ref(session)
        base = session.account_path(f"/storage/kv/namespaces/{path_segment(ref.id)}/keys")
        cursor = ""
        while True:
            params = {"prefix": prefix, **({"cursor": cursor} if cursor else {})}
            response = session.client.raw("GET", base, params=params)
            body = response.json()
            if not body.get("success"):
                raise UserError(error_text(response))
            keys += body["result"]
            cursor = (body.get("result_info") or {}).get("cursor") or ""
            if not cursor:
                break
    click.echo(json.dumps(keys, indent=2))


@key.command("delete")
@click.argument("name")
@namespace_options
def delete(
    name: str,
    target: KVTarget,
) -> None:
    """Delete key NAME."""
    echo_location(target.local)
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        click.echo(f'Deleting the key "{name}" on namespace {ref.display}.')
        with open_local(target.store_path(), ref) as ns:
            ns.delete_many([name])
        return
    with platform_session(target.platform_url, target.temporary) as session:
        ref = target.remote_ref(session)
        click.echo(f'Deleting the key "{name}" on namespace {ref.display}.')
        session.client.call("DELETE", values_path(session, ref, name))


kv.add_command(bulk)
