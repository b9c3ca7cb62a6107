"""What made a deployment or a version: Cloudflare's ``workers/triggered_by`` annotation.

The tags Cloudflare writes (read from its API: deployments list and versions view): a Scripts
PUT (``wrangler deploy``) makes an ``upload`` version and deployment; ``POST .../versions``
(``versions upload``) a ``version_upload`` version; ``POST .../deployments`` (``versions
deploy``) a ``deployment``; a secret change a ``secret`` version and deployment. wrangler's
``rollback`` sends the same POST as ``versions deploy``, so the server tells a ``rollback`` by
what it does: one version gets all traffic and it is older than every version live now.
"""

from __future__ import annotations

import sqlite3

from ember.runtime.deployments import rows
from ember.runtime.deployments.errors import SecretsChanged
from ember.runtime.deployments.records import Deployment, Script, Version
from ember.runtime.deployments.writes import secret_digest

KEY = "workers/triggered_by"


def version_trigger(*, deployed: bool) -> str:
    """The tag of a new version: made by a deploy, or uploaded to deploy later."""
    return "upload" if deployed else "version_upload"


def deployment_tags(
    conn: sqlite3.Connection,
    script: Script,
    chosen: list[Version],
    live: Deployment | None,
    annotations: dict[str, str],
    *,
    force: bool,
    triggered_by: str | None,
) -> dict[str, str]:
    """The annotations of a new deployment of ``chosen`` over ``live``: the client's message,
    the trigger (``triggered_by`` when the caller knows it), ``workers/rollback_from``.

    A rollback to a version whose secrets differ from the newest live version's is refused
    (SecretsChanged, 10220) unless ``force``, as on the platform."""
    tags = {k: v for k, v in annotations.items() if k == "workers/message"}
    if triggered_by is not None:
        return tags | {KEY: triggered_by}
    tags[KEY] = "deployment"
    if live is None or len(chosen) != 1:
        return tags
    newest = max(
        (rows.require_version(conn, script, v.version_id) for v in live.versions),
        key=lambda version: version.number,
    )
    if chosen[0].number < newest.number:
        tags[KEY] = "rollback"
        tags["workers/rollback_from"] = live.id
        if not force and secret_digest(rows.secrets_of(conn, chosen[0].id)) != secret_digest(
            rows.secrets_of(conn, newest.id)
        ):
            raise SecretsChanged(chosen[0].id)
    return tags
