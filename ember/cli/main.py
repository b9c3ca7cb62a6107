"""Root ``ember`` group: lazy subcommands and the one error boundary.

Each command lives in its own module and is imported only when it runs, so ``ember --help`` and
light commands never import torch (style R15). Failures are reported by failure.py: the
``ember: error:`` line, the exit code (1, 2 for usage, 130 interrupted) and ``--json``'s object.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from ember.cli.failure import Invocation, classify, report
from ember.errors import EmberError

# command name -> "module:attribute". A command appears once its module exists.
COMMANDS: dict[str, str] = {
    "init": "ember.cli.init:init",
    "dev": "ember.cli.dev:dev",
    "serve": "ember.cli.serve:serve",
    "deploy": "ember.cli.deploy:deploy",
    "claim": "ember.cli.claim:claim",
    "login": "ember.cli.login:login",
    "logout": "ember.cli.login:logout",
    "whoami": "ember.cli.whoami:whoami",
    "auth": "ember.cli.auth:auth",
    "deployments": "ember.cli.deployments:deployments",
    "rollback": "ember.cli.rollback:rollback",
    "versions": "ember.cli.versions:versions",
    "delete": "ember.cli.delete:delete",
    "tail": "ember.cli.tail:tail",
    "secret": "ember.cli.secret:secret",
    "kv": "ember.cli.kv:kv",
    "ai": "ember.cli.ai:ai",
    "models": "ember.cli.models:models",
    "doctor": "ember.cli.doctor:doctor",
    "accounts": "ember.cli.accounts:accounts",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        present = [name for name, target in COMMANDS.items() if _module_exists(target)]
        return sorted(set(present) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _module_exists(target):
            return super().get_command(ctx, cmd_name)
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


def _module_exists(target: str) -> bool:
    return importlib.util.find_spec(target.split(":")[0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ember", prog_name="ember")
def cli() -> None:
    """ember: run Python Workers with local Kimi and GLM models, and deploy them."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI with ember's error boundary (failure.py)."""
    _without_httpx_command_line()
    invocation = Invocation()
    try:
        cli.main(args=argv, standalone_mode=False, obj=invocation)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.ClickException, click.exceptions.Abort, EmberError) as exc:
        failure = classify(exc)
        # A command line that did not parse may not have reached the --json callback.
        args = sys.argv[1:] if argv is None else argv
        as_json = invocation.json or (
            failure.kind == "usage" and "--json" in args[: _end_of_options(args)]
        )
        report(failure, as_json=as_json, usage=_usage(exc))
        sys.exit(failure.exit_code)


def _without_httpx_command_line() -> None:
    """httpx imports its own command-line client whenever click is installed (as it is, for
    ember), and that client imports rich and pygments: ~80 ms of every command that talks HTTP,
    a third of ``ember deploy``'s start. ember never runs it. A None entry in ``sys.modules``
    makes that optional import fail at once; httpx then defines its stub ``main`` instead."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def _end_of_options(args: list[str]) -> int:
    return args.index("--") if "--" in args else len(args)


def _usage(exc: BaseException) -> str:
    """click's usage lines for a usage error, as it prints them before the error."""
    if not isinstance(exc, click.UsageError) or exc.ctx is None:
        return ""
    ctx = exc.ctx
    hint = ""
    if ctx.command.get_help_option(ctx) is not None:
        hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n"
    return f"{ctx.get_usage()}\n{hint}"
