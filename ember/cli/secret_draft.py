"""A draft worker for ``ember secret put`` / ``bulk`` on a worker that does not exist yet.

wrangler asks (workers-sdk ``src/secret/index.ts`` ``createDraftWorker``) whether to create the
worker, yes by default and in scripts, then uploads a placeholder script and sets the secrets on
it, so that secrets can be put before the first deploy. wrangler's placeholder is JavaScript
(``export default { fetch() {} }``), which ember does not run; ember's is a Python module that
answers every request with a 503 saying the worker has no code yet and how to deploy it. The
next ``ember deploy`` replaces it and keeps the secrets, as a deploy over any version does.
"""

from __future__ import annotations

import datetime
import json
import secrets

import click

from ember.cli.platform_client import PlatformNotFound, PlatformRequestError
from ember.cli.prompts import confirm
from ember.cli.session import Session, path_segment
from ember.runtime.deployments.multipart import Part, build_multipart

# wrangler's codes for "no such worker" (deploy-helpers worker-not-found-error.ts).
WORKER_NOT_FOUND = (10007, 10090)
MAIN = "entry.py"
PLACEHOLDER = '''\
"""A draft: `ember secret put` created this Worker to hold its secrets before its code."""

from workers import Response


async def on_fetch(request, env):
    return Response(
        "This Worker has no code yet: it was created to hold its secrets. "
        "Deploy its code with `ember deploy`.\\n",
        status=503,
    )
'''


def worker_missing(exc: PlatformNotFound) -> bool:
    return exc.code in WORKER_NOT_FOUND


def offer_draft(session: Session, worker: str) -> bool:
    """Ask to create ``worker`` (wrangler's question and answers); create it if so. False:
    the user declined, and was told nothing was added."""
    question = (
        f'There doesn\'t seem to be a Worker called "{worker}". Do you want to create a new '
        "Worker with that name and add secrets to it?"
    )
    if not confirm(question, default=True, fallback=True):
        click.echo("Aborting. No secrets added.")
        return False
    click.echo(f'🌀 Creating new Worker "{worker}"...')
    metadata = {
        "main_module": MAIN,
        "bindings": [],
        # The platform's today: it refuses a date past today in UTC, which a local date east
        # of UTC is for part of every day.
        "compatibility_date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "compatibility_flags": [],
    }
    boundary = "----ember-" + secrets.token_hex(12)
    body = build_multipart(
        [
            Part("metadata", None, None, json.dumps(metadata).encode()),
            Part(MAIN, MAIN, "text/x-python", PLACEHOLDER.encode()),
        ],
        boundary,
    )
    try:
        session.client.call(
            "PUT",
            session.account_path(f"/workers/scripts/{path_segment(worker)}"),
            content=body,
            # Create-only: a Worker deployed while the question waited is not replaced by
            # the placeholder (412); the secret then goes to that Worker.
            headers={
                "content-type": f"multipart/form-data; boundary={boundary}",
                "if-none-match": "*",
            },
        )
    except PlatformRequestError as exc:
        if exc.status != 412:
            raise
    return True
