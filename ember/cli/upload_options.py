"""The flags ``wrangler deploy`` and ``wrangler versions upload`` share, on ember's upload commands.

wrangler declares them once (``sharedDeployVersionsArgs`` in workers-sdk
``src/deployment-bundle/deploy-args.ts``) and merges them over the config in
``merge-config-args.ts``; ember does the same with one decorator (``upload_options``) and one
function (``plan_upload``) that turns a loaded project and the flags into what is uploaded:

- ``--var KEY:VALUE``: a plain-text var for this upload, over the config's (split at the first
  ``:``, as ``collectKeyValues`` does); shown as ``(hidden)`` in the bindings table. Like every
  array flag here, repeatable or given several values at once (``ArrayOption``).
- ``--keep-vars`` (or ``keep_vars = true`` in the config): vars the platform has that the config
  lacks are kept; the metadata's ``keep_bindings`` gains ``plain_text`` and ``json``.
- ``--secrets-file FILE`` (JSON or ``.env``): secrets uploaded *with* the version, as
  ``secret_text`` bindings of the same upload. Additive: secrets the file omits are inherited
  (``keep_bindings`` always holds ``secret_text``), and a JSON ``null`` is skipped, not a delete.
  ``.env`` values expand ``$VAR``/``${VAR}`` and the process environment overrides them, as in
  wrangler 4.164 (``ember.dotenv_expand``).
- ``--compatibility-date``, ``--compatibility-flags`` (repeatable; replaces the config's list),
  ``--latest`` (today's date, UTC: the newest the platform accepts; wins over the others).
- ``--tag`` / ``--message``: the version's ``workers/tag`` / ``workers/message`` annotations.
- ``--dry-run`` (build and check, upload nothing) and ``--outdir DIR`` (write the modules).

A bad value is refused before anything is read from or sent to the platform, naming the flag.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from ember.cli.secrets_file import read_secrets
from ember.cli.worker_project import WorkerProject
from ember.errors import UserError
from ember.runtime.deployments.multipart import Part

F = TypeVar("F", bound=Callable[..., Any])
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_BINDING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_KEEP_TYPES = ("secret_text", "secret_key")  # wrangler's keepSecrets, on every upload
VAR_KEEP_TYPES = ("plain_text", "json")  # and its keepVars


class OptionError(UserError):
    """A command-line flag has a value the command cannot use: names the flag, what was found
    and what was expected."""

    def __init__(self, option: str, found: object, expected: str) -> None:
        self.option = option
        self.found = found
        self.expected = expected
        super().__init__(f"{option}: expected {expected}, found {found!r}")


class ArrayOption(click.Option):
    """A repeatable option that also takes the values after it, up to the next option, as a
    yargs ``array: true`` option does: wrangler's ``--var A:1 B:2`` is ``--var A:1 --var B:2``,
    so CI lines written for wrangler mean the same here (a positional after the values is taken
    too, as by wrangler). Click has no such option; this wraps the parser's handler of the
    option, and without that internal it is a plain repeatable option."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        handlers = getattr(parser, "_long_opt", {}) | getattr(parser, "_short_opt", {})
        prefixes = tuple(getattr(parser, "_opt_prefixes", ("-",)))
        handler = next((handlers[o] for o in self.opts if o in handlers), None)
        if handler is None or not hasattr(handler, "process"):
            return
        process = handler.process

        def take_following(value: Any, state: Any) -> None:
            process(value, state)
            while state.rargs and not state.rargs[0].startswith(prefixes):
                process(state.rargs.pop(0), state)

        handler.process = take_following


@dataclass(frozen=True, slots=True)
class UploadOptions:
    """The shared upload flags as given (``None``: the flag was not given)."""

    vars: Mapping[str, str] = field(default_factory=dict)
    keep_vars: bool = False
    secrets_file: Path | None = None
    compatibility_date: str | None = None
    compatibility_flags: tuple[str, ...] | None = None
    latest: bool = False
    tag: str | None = None
    message: str | None = None
    dry_run: bool = False
    outdir: Path | None = None


@dataclass(frozen=True, slots=True)
class UploadPlan:
    """A project with the flags applied: what one upload sends."""

    project: WorkerProject  # vars, compatibility date and flags already overridden
    secrets: Mapping[str, str]  # from --secrets-file, sent as secret_text bindings
    hidden_vars: frozenset[str]  # the --var names: printed as (hidden), as wrangler does
    keep_vars: bool
    annotations: Mapping[str, str]
    dry_run: bool
    outdir: Path | None

    @property
    def keep_bindings(self) -> list[str]:
        """The metadata's ``keep_bindings``: what the new version inherits by type."""
        return [*(VAR_KEEP_TYPES if self.keep_vars else ()), *SECRET_KEEP_TYPES]


def parse_var(item: str, option: str = "--var") -> tuple[str, str]:
    """``KEY:VALUE`` split at the first ``:`` (the value may hold more)."""
    key, sep, value = item.partition(":")
    if not sep or not key.strip():
        raise OptionError(option, item, "KEY:VALUE, e.g. --var GREETING:hello")
    return key.strip(), value


def parse_vars(items: Iterable[str], option: str = "--var") -> dict[str, str]:
    """Every ``--var``, later ones winning (``ember dev --var`` reads them the same way)."""
    return dict(parse_var(item, option) for item in items)


def today_utc() -> str:
    """Today as the platform counts it (a later date is refused with 10021)."""
    return datetime.datetime.now(datetime.UTC).date().isoformat()


def check_compatibility_date(value: str, today: str, option: str = "--compatibility-date") -> str:
    """``value`` if it is a real YYYY-MM-DD date that is not after ``today``."""
    try:
        valid = bool(_DATE.match(value)) and bool(datetime.date.fromisoformat(value))
    except ValueError:
        valid = False
    if not valid:
        raise OptionError(option, value, "a date as YYYY-MM-DD, e.g. 2026-11-01")
    if value > today:
        raise OptionError(
            option,
            value,
            f"a date that is not in the future (today is {today} UTC; the platform refuses a "
            "later one with code 10021)",
        )
    return value


def read_secrets_file(path: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets of ``--secrets-file``: a JSON object, or ``.env`` lines with ``$VAR``
    expanded against ``environ`` (whose values also win over the file's); nulls skipped."""
    if not path.is_file():
        raise OptionError("--secrets-file", str(path), "an existing JSON or .env file of secrets")
    changes = read_secrets(path, None, environ).changes
    # Checked here as the platform checks binding names, so a dry run finds it too.
    bad = [name for name in changes if not _BINDING_NAME.match(name)]
    if bad:
        raise OptionError(
            "--secrets-file",
            f"{path}: {', '.join(bad)}",
            "secret names that are identifiers (letters, digits and _, not starting with a digit)",
        )
    return {name: value for name, value in changes.items() if value is not None}


def plan_upload(
    project: WorkerProject,
    options: UploadOptions,
    today: str,
    warn: Callable[[str], None] = lambda message: None,
    environ: Mapping[str, str] | None = None,
) -> UploadPlan:
    """``project`` with ``options`` applied; reads the secrets file (``environ``: the process
    environment its ``.env`` form expands against; none when not given)."""
    date = project.compatibility_date
    if options.latest:
        date = today
        warn(
            f"Using the latest compatibility date ({today}, today in UTC). To silence this "
            "warning, please choose a specific version of the runtime with "
            "--compatibility-date, or add a compatibility_date to your configuration file."
        )
    elif options.compatibility_date is not None:
        date = check_compatibility_date(options.compatibility_date, today)
    flags = project.compatibility_flags
    if options.compatibility_flags is not None:
        # Replaces the config's list, as in wrangler; ember's uploads are Python Workers, so
        # python_workers stays (worker_project adds it to the config's list the same way).
        flags = tuple(dict.fromkeys([*options.compatibility_flags, "python_workers"]))
    if options.outdir is not None and options.outdir.resolve().is_relative_to(project.module_root):
        warn(
            f"--outdir {options.outdir} is inside the Worker's module directory "
            f"({project.module_root}): the next deploy would upload its files as modules too."
        )
    secrets = {}
    if options.secrets_file is not None:
        secrets = read_secrets_file(options.secrets_file, environ or {})
    _check_binding_names(project, options.vars, "--var")
    _check_binding_names(project, secrets, "--secrets-file")
    annotations = {
        key: value
        for key, value in (("workers/message", options.message), ("workers/tag", options.tag))
        if value
    }
    return UploadPlan(
        project=dataclasses.replace(
            project,
            vars={**project.vars, **options.vars},
            compatibility_date=date,
            compatibility_flags=flags,
        ),
        secrets=secrets,
        hidden_vars=frozenset(options.vars),
        keep_vars=options.keep_vars or project.keep_vars,
        annotations=annotations,
        dry_run=options.dry_run,
        outdir=options.outdir,
    )


def _check_binding_names(project: WorkerProject, names: Iterable[str], option: str) -> None:
    """A var or secret named like a binding would hide it on ``env``: refused before the
    upload, as ``ember dev`` refuses it (wrangler: bindings must have unique names)."""
    kinds = {kv.binding: "kv_namespace" for kv in project.kv_namespaces}
    if project.ai_binding:
        kinds[project.ai_binding] = "ai"
    for name in names:
        if name in kinds:
            raise OptionError(
                option, name, f"a name no binding uses (the {kinds[name]} binding {name} has it)"
            )


def upload_options(function: F) -> F:
    """The shared flags, handed to ``function`` as one ``upload: UploadOptions`` argument."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = kwargs.pop("compatibility_flags")
        kwargs["upload"] = UploadOptions(
            vars=parse_vars(kwargs.pop("vars_")),
            keep_vars=kwargs.pop("keep_vars"),
            secrets_file=kwargs.pop("secrets_file"),
            compatibility_date=kwargs.pop("compatibility_date"),
            compatibility_flags=tuple(flags) if flags else None,
            latest=kwargs.pop("latest"),
            tag=kwargs.pop("tag"),
            message=kwargs.pop("message"),
            dry_run=kwargs.pop("dry_run"),
            outdir=kwargs.pop("outdir"),
        )
        return function(*args, **kwargs)

    options = [
        click.option(
            "--var",
            "vars_",
            cls=ArrayOption,
            multiple=True,
            metavar="KEY:VALUE",
            help="A var for this upload, over the config's (repeatable).",
        ),
        click.option(
            "--keep-vars",
            is_flag=True,
            help="Keep vars set on the platform that the config lacks (default: replace them).",
        ),
        click.option(
            "--secrets-file",
            type=click.Path(dir_okay=False, path_type=Path),
            metavar="FILE",
            help="Secrets (JSON or .env) uploaded with the version; others are kept.",
        ),
        click.option(
            "--compatibility-date", metavar="YYYY-MM-DD", help="Overrides compatibility_date."
        ),
        click.option(
            "--compatibility-flags",
            "--compatibility-flag",
            "compatibility_flags",
            cls=ArrayOption,
            multiple=True,
            metavar="FLAG",
            help="Replaces compatibility_flags (repeatable).",
        ),
        click.option(
            "--latest", is_flag=True, help="Use today's date (UTC) as the compatibility date."
        ),
        click.option("--tag", help="A tag for this version (annotation workers/tag)."),
        click.option("--message", help="A message for this version (annotation workers/message)."),
        click.option("--dry-run", is_flag=True, help="Build and check everything; upload nothing."),
        click.option(
            "--outdir",
            type=click.Path(file_okay=False, path_type=Path),
            metavar="DIR",
            help="Write the modules that are (or would be) uploaded to DIR.",
        ),
    ]
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def write_outdir(plan: UploadPlan, modules: Iterable[Part], generated_at: str) -> None:
    """The modules as wrangler's ``--outdir`` holds a no-bundle (Python) Worker: each at its
    module name, with a README saying what the folder is."""
    outdir = plan.outdir
    if outdir is None:
        return
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / "README.md").write_text(
            f'This folder contains the built output assets for the worker "{plan.project.name}" '
            f"generated at {generated_at}."
        )
        for module in modules:
            target = outdir / module.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(module.data)
    except OSError as exc:
        raise OptionError("--outdir", str(outdir), f"a directory ember can write ({exc})") from None
