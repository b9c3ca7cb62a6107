"""Yes/no questions the way wrangler asks them (workers-sdk ``dialogs.ts`` ``confirm``).

At a terminal the question is asked. Without one (stdin or stdout not a terminal, or ``CI``
set: a script, a pipeline) nothing is read: the question is printed with the answer used,
wrangler's fallback (yes, unless the command says otherwise), so a wrangler script that
deletes or redeploys without ``--force``/``--yes`` does the same against ember. Pass the
command's own ``--yes``/``--force`` to skip the question entirely.
"""

from __future__ import annotations

import os
import sys

import click


def non_interactive() -> bool:
    """wrangler's ``isNonInteractiveOrCI``: no terminal to ask on, or a CI environment."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false")
    return ci or not (sys.stdin.isatty() and sys.stdout.isatty())


def confirm(
    question: str, *, default: bool = False, fallback: bool = True, err: bool = False
) -> bool:
    """Ask ``question`` at a terminal (``default`` on Enter); elsewhere print it and answer
    ``fallback``, as wrangler does ("Using fallback value in non-interactive context"). ``err``:
    on stderr, for commands whose stdout is JSON."""
    if non_interactive():
        click.echo(f"? {question}", err=err)
        click.echo(
            "🤖 Using fallback value in non-interactive context: " + ("yes" if fallback else "no"),
            err=err,
        )
        return fallback
    return click.confirm(question, default=default, err=err)
