"""``ember kv bulk put|get|delete FILE``: many keys at once, local (the default) or ``--remote``.

Files are wrangler's (``kv_bulk_files.py``). Every item is checked before anything is written,
with the binding's own limits (``bindings/kv/bulk.py``, shared with the platform's bulk route), so
a bad item is named by its index in the file and nothing of the file is stored. Locally a file is
then written in one transaction (all of it or none). Remotely it goes to the platform's bulk
routes in requests of at most ``MAX_ITEMS_PER_REQUEST`` items and ``MAX_REQUEST_BYTES`` of JSON
(the platform's JSON body limit): each request is one transaction there, so a request refused
(past an account's quota, say) leaves the requests before it written; the progress lines say
how far it got.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from ember.bindings.kv import limits
from ember.bindings.kv.bulk import bulk_write, item_label
from ember.cli.kv_bulk_files import key_names, put_items, read_json
from ember.cli.kv_target import (
    KVTarget,
    echo_location,
    namespace_options,
    platform_session,
)
from ember.cli.prompts import confirm
from ember.cli.session import path_segment

MAX_ITEMS_PER_REQUEST = 1000  # wrangler's BATCH_KEY_MAX (a tenth of the API's 10,000)
MAX_REQUEST_BYTES = 1_000_000  # under the platform's 1 MiB JSON body limit
MAX_GET_KEYS = limits.MAX_BULK_GET_KEYS  # per bulk/get request


@click.group()
def bulk() -> None:
    """Write, read and delete many keys from a JSON file (local unless --remote)."""


@bulk.command("put")
@click.argument("filename", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@namespace_options
def put(
    filename: Path,
    target: KVTarget,
) -> None:
    """Write the key/value pairs of FILENAME: [{"key", "value", "expiration"?,
    "expiration_ttl"?, "metadata"?, "base64"?}, ...]."""
    echo_location(target.local)
    parsed = put_items(read_json(filename), str(filename))
    if parsed.warnings:
        click.secho(
            f'▲ Unexpected key-value properties in "{filename}".\n' + "\n".join(parsed.warnings),
            fg="yellow",
            err=True,
        )
    # The binding's checks on every item, before the first write (the platform makes the same
    # ones again, with its own clock, for remote writes).
    writes = [bulk_write(time.time(), i, item) for i, item in enumerate(parsed.items)]
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        with open_local(target.store_path(), ref) as ns:
            ns.put_many(writes)
    else:
        with platform_session(target.platform_url, target.temporary) as session:
            ref = target.remote_ref(session)
            path = session.account_path(f"/storage/kv/namespaces/{path_segment(ref.id)}/bulk")
            for batch in _batches(parsed.items, "Uploaded"):
                session.client.call("PUT", path, json=batch)
    click.echo("Success!")


@bulk.command("get")
@click.argument("filename", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@namespace_options
def get(
    filename: Path,
    target: KVTarget,
) -> None:
    """Print the values of the keys in FILENAME (["key", ...] or [{"name"}, ...]) as JSON."""
    keys = _checked_keys(filename, "GET")
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        with open_local(target.store_path(), ref) as ns:
            found = ns.get_text(keys)
        # wrangler's local shape: each key maps to {"value": text or null}.
        click.echo(json.dumps({k: {"value": v} for k, v in found.items()}, indent=2))
        return
    values: dict[str, Any] = {}
    with platform_session(target.platform_url, target.temporary) as session:
        ref = target.remote_ref(session)
        path = session.account_path(f"/storage/kv/namespaces/{path_segment(ref.id)}/bulk/get")
        for start in range(0, len(keys), MAX_GET_KEYS):
            chunk = keys[start : start + MAX_GET_KEYS]
            values |= session.client.call("POST", path, json={"keys": chunk})["values"]
    # wrangler's remote shape: the API's ``result.values``, each key mapping to its text.
    click.echo(json.dumps(values, indent=2))


@bulk.command("delete")
@click.argument("filename", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--force", "-f", is_flag=True, help="Do not ask for confirmation before deleting.")
@namespace_options
def delete(
    filename: Path,
    force: bool,
    target: KVTarget,
) -> None:
    """Delete the keys in FILENAME (["key", ...] or [{"name"}, ...])."""
    echo_location(target.local)
    if target.local:
        from ember.cli.kv_local import open_local

        ref = target.local_ref()
        if not _confirmed(force, filename, ref.display):
            return
        keys = _checked_keys(filename, "DELETE")
        with open_local(target.store_path(), ref) as ns:
            ns.delete_many(keys)
    else:
        with platform_session(target.platform_url, target.temporary) as session:
            ref = target.remote_ref(session)
            if not _confirmed(force, filename, ref.display):
                return
            keys = _checked_keys(filename, "DELETE")
            path = session.account_path(f"/storage/kv/namespaces/{path_segment(ref.id)}/bulk")
            for batch in _batches(keys, "Deleted"):
                session.client.call("DELETE", path, json=batch)
    click.echo("Success!")


def _confirmed(force: bool, filename: Path, display: str) -> bool:
    """wrangler asks before a bulk delete (``--force`` skips it) and says so when told no."""
    if force or confirm(
        f'Are you sure you want to delete all the keys read from "{filename}" from '
        f"kv-namespace {display}?",
        default=False,
    ):
        return True
    click.echo(f'Not deleting keys read from "{filename}".')
    return False


def _checked_keys(filename: Path, op: str) -> list[str]:
    """The file's keys, each checked as the binding checks a key (named by index if refused)."""
    keys = key_names(read_json(filename), str(filename))
    for index, key in enumerate(keys):
        try:
            limits.validate_key(op, key)
        except limits.KVError as exc:
            label = item_label(index, {"key": key})
            raise limits.KVError(op, exc.status, f"{label}: {exc.reason}") from None
    return keys


def _batches(items: Sequence[Any], verb: str) -> Iterator[list[Any]]:
    """``items`` in requests the platform takes, with wrangler's progress lines when several."""
    batches: list[list[Any]] = []
    current: list[Any] = []
    size = 2  # the brackets
    for item in items:
        item_size = len(json.dumps(item, ensure_ascii=False).encode()) + 1
        if current and (
            len(current) >= MAX_ITEMS_PER_REQUEST or size + item_size > MAX_REQUEST_BYTES
        ):
            batches.append(current)
            current, size = [], 2
        current.append(item)
        size += item_size
    if current:
        batches.append(current)
    total, done = len(items), 0
    for batch in batches:
        if len(batches) > 1:
            _progress(verb, done, total)
        yield batch
        done += len(batch)
    if len(batches) > 1:
        _progress(verb, done, total)


def _progress(verb: str, done: int, total: int) -> None:
    click.echo(f"{verb} {100 * done // total}% ({done:,} out of {total:,})")
