"""Which KV namespace an ``ember kv key|bulk`` command touches, and where: local or a platform.

As in wrangler 4 (``isLocal(args)`` defaults to true for ``kv key`` and ``kv bulk``), these
commands work on **local** state unless ``--remote`` is given: the SQLite file ``ember dev`` uses,
``DIR/kv.sqlite3`` with DIR the same ``--persist-to`` as ``ember dev`` (default
``.ember/state`` in the project). ``kv namespace`` commands are always remote.

A namespace is named by ``--namespace-id`` or by ``--binding NAME`` of the project here. Locally
a binding means what it means to ``ember dev``: its configured id, else the binding's own name.
Remotely a binding without an id means the namespace the live version is bound to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import httpx

from ember.cli.environment import chosen_env, with_env_option
from ember.cli.session import Session, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option
from ember.errors import UserError

if TYPE_CHECKING:
    from ember.cli.worker_project import KVBinding, WorkerProject

F = TypeVar("F", bound=Callable[..., Any])

binding_option = with_env_option(
    click.option("--binding", metavar="NAME", help="A KV binding of the project here.")
)
namespace_option = click.option("--namespace-id", metavar="ID", help="The namespace's id.")
local_option = click.option(
    "--local", is_flag=True, default=None, help="Use the local state of ember dev (the default)."
)
remote_option = click.option(
    "--remote", is_flag=True, default=None, help="Use the namespace on an ember platform."
)
persist_option = click.option(
    "--persist-to",
    type=click.Path(file_okay=False, path_type=Path),
    help="ember dev's state directory, for --local (default .ember/state).",
)


@dataclass(frozen=True, slots=True)
class KVTarget:
    """What a ``kv key|bulk`` command's shared flags name: the namespace, and where it is."""

    binding: str | None
    namespace_id: str | None
    local: bool  # wrangler's isLocal: true unless --remote
    persist_to: Path | None
    platform_url: str | None
    temporary: bool  # wrangler's --temporary: the platform session uses a temporary account

    def local_ref(self) -> NamespaceRef:
        return local_namespace(self.binding, self.namespace_id)

    def store_path(self) -> Path:
        return local_store_path(self.persist_to)

    def remote_ref(self, session: Session) -> NamespaceRef:
        return remote_namespace(session, self.binding, self.namespace_id)


def namespace_options(command: F) -> F:
    """The options every ``kv key`` and ``kv bulk`` command shares (the namespace, and where),
    handed to ``command`` as one ``target: KVTarget`` argument."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["target"] = KVTarget(
            binding=kwargs.pop("binding"),
            namespace_id=kwargs.pop("namespace_id"),
            local=is_local(kwargs.pop("local"), kwargs.pop("remote")),
            persist_to=kwargs.pop("persist_to"),
            platform_url=kwargs.pop("platform_url"),
            temporary=kwargs.pop("temporary"),
        )
        return command(*args, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in (
        temporary_option,
        platform_option,
        persist_option,
        remote_option,
        local_option,
        namespace_option,
        binding_option,
    ):  # innermost first, so --help lists them from --binding down
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def is_local(local: bool | None, remote: bool | None) -> bool:
    """wrangler's ``isLocal``: local unless ``--remote`` (or ``--no-local``) is given."""
    if local and remote:
        raise click.UsageError("--local and --remote cannot be used together")
    return not remote


def echo_location(local: bool) -> None:
    """The lines wrangler prints before a write or delete, so a person sees which data changed."""
    if local:
        click.echo("Resource location: local\n")
        click.echo("Use --remote if you want to access the remote instance.\n")
    else:
        click.echo("Resource location: remote\n")


@dataclass(frozen=True, slots=True)
class NamespaceRef:
    """A resolved namespace: its id, how messages name it, and (locally) the title ``ember dev``
    gives it when it creates it, so whichever of the two writes first, the row is the same."""

    id: str
    display: str
    title: str


def local_namespace(binding: str | None, namespace_id: str | None) -> NamespaceRef:
    """The namespace ``ember dev`` binds as ``binding`` (or the given id), without any network."""
    _one_of(binding, namespace_id)
    if namespace_id is not None:
        return NamespaceRef(namespace_id, f'id: "{namespace_id}"', namespace_id)
    project, entry = _project_binding(binding)
    # ember dev: ``kv_namespaces[].id``, else the binding's name (bindings/kv/spec.py), and the
    # title it registers is "<deployment>-<binding>" with the deployment named after the worker.
    ns_id = entry.id or entry.binding
    return NamespaceRef(ns_id, f'binding: "{binding}" (id: "{ns_id}")', f"{project.name}-{binding}")


def remote_namespace(
    session: Session, binding: str | None, namespace_id: str | None
) -> NamespaceRef:
    """The platform namespace: the id given, the binding's configured id, or the live one's."""
    _one_of(binding, namespace_id)
    if namespace_id is not None:
        return NamespaceRef(namespace_id, f'id: "{namespace_id}"', namespace_id)
    project, entry = _project_binding(binding)
    ns_id = entry.id or _live_namespace(session, project.name, entry.binding)
    return NamespaceRef(ns_id, f'binding: "{binding}" (id: "{ns_id}")', ns_id)


def local_store_path(persist_to: Path | None) -> Path:
    """The KV file of ``ember dev --persist-to persist_to`` run in this directory."""
    from ember.bindings.kv.service import STORE_FILE
    from ember.runtime.dev_state import STATE_DIR

    return (persist_to if persist_to is not None else Path(".") / STATE_DIR) / STORE_FILE


def _one_of(binding: str | None, namespace_id: str | None) -> None:
    if (binding is None) == (namespace_id is None):
        raise UserError("name the namespace with --binding NAME or --namespace-id ID (one)")


def _project_binding(binding: str | None) -> tuple[WorkerProject, KVBinding]:
    from ember.cli.worker_project import load_project

    project = load_project(Path("."), None, chosen_env().name)
    entry = next((b for b in project.kv_namespaces if b.binding == binding), None)
    if entry is None:
        names = ", ".join(b.binding for b in project.kv_namespaces) or "none"
        raise UserError(
            f"{project.config_file.name} has no KV binding {binding!r} (its KV bindings: {names})"
        )
    return project, entry


def _live_namespace(session: Session, worker: str, binding: str) -> str:
    settings = session.client.call(
        "GET", session.account_path(f"/workers/scripts/{path_segment(worker)}/settings")
    )
    for item in settings.get("bindings", []):
        if item.get("name") == binding and item.get("type") == "kv_namespace":
            return str(item["namespace_id"])
    raise UserError(
        f"binding {binding!r} has no namespace id in the config and worker {worker!r} "
        "has no live version bound to one: deploy it first, or pass --namespace-id"
    )


@contextmanager
def platform_session(platform_url: str | None, temporary: bool) -> Iterator[Session]:
    """An authenticated session on the platform (``temporary``: on a temporary account, as
    ``--temporary`` asks), closed afterwards."""
    session = command_session(platform_url, temporary)
    try:
        yield session
    finally:
        session.close()


def values_path(session: Session, ref: NamespaceRef, key: str) -> str:
    """The client/v4 path of one key's value (the key percent-encoded, as wrangler sends it)."""
    return session.account_path(
        f"/storage/kv/namespaces/{path_segment(ref.id)}/values/{path_segment(key)}"
    )


def error_text(response: httpx.Response) -> str:
    """``message [code: N]`` of an error envelope, as wrangler prints it."""
    try:
        error = response.json()["errors"][0]
        return f"{error['message']} [code: {error['code']}]"
    except (ValueError, KeyError, IndexError, TypeError):
        return f"HTTP {response.status_code}"
