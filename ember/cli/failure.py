"""How a failed command ends: its exit code, its stderr line and, with ``--json``, its JSON.

An agent that drives the CLI without a terminal reads stdout and the exit code. Every failure
prints one ``ember: error: ...`` line on stderr (a usage error first shows the usage, as click
does) and exits 1, as wrangler does for every error; a command line that does not parse exits 2
(argparse's and click's code), an interrupted one 130 (128 + SIGINT). With ``--json`` the same
failure is also one JSON object on stdout, ``{"error": {"code", "message", "kind"}}``: ``code``
is the platform's Cloudflare or Workers AI code when it sent one, ``kind`` one of ``KINDS``.
Categories go in ``kind`` rather than the exit code: wrangler gives every error 1, and scripts
written for it test ``!= 0``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ember.errors import (
    AuthError,
    ConfigError,
    EmberError,
    LimitExceeded,
    ModelNotFound,
    NotFound,
    UserError,
)

PREFIX = "ember: error: "
EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130

# kind -> what it means (README's table of failures says the same).
KINDS = {
    "usage": "the command line does not parse (exit 2)",
    "auth": "no credentials, or the platform refused them (token, expired temporary account)",
    "not_found": "the worker, version, namespace, key or model does not exist",
    "config": "a config file (ember.yaml, wrangler.toml, .dev.vars) is invalid",
    "invalid": "the platform or ember refused the request or a value in it",
    "limit": "a quota, size limit or rate limit was reached",
    "unreachable": "nothing answered at the platform's URL",
    "no_answer": "the platform took the request and closed the connection before answering",
    "platform": "the platform failed (HTTP 5xx) or answered something that is not its API",
    "interrupted": "stopped by Ctrl-C (exit 130)",
    "internal": "ember's own failure: possibly a bug",
}
# Cloudflare / Workers AI codes of a quota or rate limit, whatever HTTP status carried them:
# 10037 (quota, sent as 403), 10027 (script too large), 971 (rate), 3036 (AI quota), 3040.
LIMIT_CODES = frozenset({10037, 10027, 971, 3036, 3040})
NOT_FOUND_CODES = frozenset({5007})  # Workers AI's "No such model", sent as 400


class RemoteFailure(UserError):
    """A platform (or an ember's AI API) refused a request: its HTTP status and code, if any."""

    def __init__(self, status: int, code: int | None, text: str, kind: str | None = None) -> None:
        self.status = status
        self.code = code
        self.kind = kind or remote_kind(status, code)
        super().__init__(text)


class Unreachable(UserError):
    """Nothing answered HTTP at the URL (refused, timed out, a bad host)."""


class NoAnswer(UserError):
    """The platform was reached and closed the connection before answering."""


def remote_kind(status: int, code: int | None) -> str:
    """The ``kind`` of a platform's refusal, from its code first (10037 comes as a 403)."""
    if code in LIMIT_CODES or status in (413, 429):
        return "limit"
    if status in (401, 403):
        return "auth"
    if status == 404 or code in NOT_FOUND_CODES:
        return "not_found"
    if status >= 500 or code is None:
        return "platform"
    return "invalid"


@dataclass(frozen=True)
class Failure:
    """One failed command, as it is reported."""

    kind: str
    message: str
    code: int | None = None
    exit_code: int = EXIT_ERROR

    def to_json(self) -> str:
        error = {"code": self.code, "message": self.message, "kind": self.kind}
        return json.dumps({"error": error})


def classify(exc: BaseException) -> Failure:
    """The failure ``exc`` reports (an EmberError or one of click's)."""
    if isinstance(exc, click.exceptions.Abort | KeyboardInterrupt):
        return Failure("interrupted", "interrupted", exit_code=EXIT_INTERRUPTED)
    if isinstance(exc, click.UsageError):
        return Failure("usage", exc.format_message(), exit_code=EXIT_USAGE)
    if isinstance(exc, click.ClickException):
        return Failure("invalid", exc.format_message(), exit_code=exc.exit_code)
    message = str(exc)
    if isinstance(exc, RemoteFailure):
        return Failure(exc.kind, message, exc.code)
    if not isinstance(exc, UserError):
        return Failure("internal", message if isinstance(exc, EmberError) else repr(exc))
    if isinstance(exc, Unreachable):
        return Failure("unreachable", message)
    if isinstance(exc, NoAnswer):
        return Failure("no_answer", message)
    if isinstance(exc, AuthError):
        return Failure("auth", message)
    if isinstance(exc, NotFound | ModelNotFound):
        return Failure("not_found", message)
    if isinstance(exc, LimitExceeded):
        return Failure("limit", message)
    if isinstance(exc, ConfigError):
        return Failure("config", message)
    return Failure("invalid", message)


@dataclass
class Invocation:
    """What the error boundary needs to know about the command that ran (click's ``obj``)."""

    json: bool = False


F = TypeVar("F", bound=Callable[..., Any])


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    invocation = ctx.find_object(Invocation)
    if invocation is not None and value:
        invocation.json = True
    return value


def json_option(help_text: str) -> Callable[[F], F]:
    """``--json``: the command's output as JSON, and a failure as one JSON object on stdout.
    Eager, so it is known even when a later option fails to parse."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=_remember_json,
        help=help_text,
    )


def report(failure: Failure, *, as_json: bool, usage: str = "") -> None:
    """Print ``failure``: the usage (if any) and the error line on stderr, the JSON on stdout."""
    if as_json:
        click.echo(failure.to_json())
    if failure.kind == "interrupted":
        click.echo("Aborted.", err=True)
        return
    if usage:
        click.echo(usage, err=True)
    internal = "internal error (possibly a bug): " if failure.kind == "internal" else ""
    click.echo(PREFIX + internal + failure.message, err=True)
