"""``--env NAME`` / ``-e NAME``: which environment (``[env.NAME]``) of the project a command uses.

As in wrangler (its global ``env`` flag, alias ``e``; ``args.env ?? getCloudflareEnv()`` in
workers-utils ``config/validation.ts``): the flag wins over the ``CLOUDFLARE_ENV`` environment
variable, and ``--env ""`` selects the top level even when the variable is set.

The option's value is not passed to the handler: its callback records the choice on the click
context, where the helpers that load the project (``worker_name``, the KV ``--binding`` lookup,
``ember ai``'s project config) read it. Commands gain environments by one decorator line and
keep their signatures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from click.core import ParameterSource

ENV_VARIABLE = "CLOUDFLARE_ENV"
_META_KEY = "ember.env"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class EnvChoice:
    """The environment chosen, and whether ``--env`` chose it (not ``CLOUDFLARE_ENV``)."""

    name: str | None = None  # None: the top level
    from_flag: bool = False


def _record(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    source = ctx.get_parameter_source(param.name or "")
    ctx.meta[_META_KEY] = EnvChoice(value or None, source is ParameterSource.COMMANDLINE)
    return value


env_option = click.option(
    "--env",
    "-e",
    "env_name",
    metavar="NAME",
    envvar=ENV_VARIABLE,
    expose_value=False,
    callback=_record,
    help=f"Use the config's [env.NAME] section (default: ${ENV_VARIABLE}, else the top level).",
)


def with_env_option(decorator: Callable[[F], F]) -> Callable[[F], F]:
    """``decorator`` (an option naming something in the project's config, such as ``--binding``)
    together with ``--env``: every command that takes the one takes the other."""

    def both(function: F) -> F:
        return decorator(env_option(function))

    return both


def chosen_env() -> EnvChoice:
    """The environment the running command was given (the top level outside a command)."""
    ctx = click.get_current_context(silent=True)
    choice = ctx.meta.get(_META_KEY) if ctx is not None else None
    return choice if isinstance(choice, EnvChoice) else EnvChoice()


def show_warnings(warnings: Iterable[str]) -> None:
    """Config warnings on stderr, marked as ``ember dev`` marks them."""
    for warning in warnings:
        click.secho(f"▲ {warning}", fg="yellow", err=True)
