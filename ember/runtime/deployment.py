"""``Deployment``: everything the supervisor needs to run one worker, as one typed value.

``ember dev`` builds one from a project directory (its modules staged as a deploy would upload
them, ``ember.runtime.worker_modules``); ``ember serve`` builds one per deployed version (its own
code directory, an account-scoped id, namespaces rewritten to the account's).
The supervisor only ever sees this value: it never reads config files itself.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ember.bindings.assets.files import check_limits
from ember.bindings.assets.serving import AssetsPolicy
from ember.bindings.assets.spec import policy_of
from ember.bindings.base import BindingSpec
from ember.bindings.env import MissingNameHints
from ember.bindings.registry import BindingRegistry
from ember.config import JSONValue, ProjectConfig, load_project
from ember.python_project import Requirement, read_python_project
from ember.runtime.limits import Limits
from ember.runtime.project_check import check_project
from ember.runtime.worker_modules import collect_modules, stage_modules

SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "venv", "python_modules"})


@dataclass(frozen=True, slots=True)
class Deployment:
    """One worker version, ready to run."""

    id: str
    name: str
    code_dir: Path
    main: str  # relative to code_dir
    vars: Mapping[str, JSONValue] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    bindings: tuple[BindingSpec, ...] = ()
    limits: Limits = field(default_factory=Limits)
    crons: tuple[str, ...] = ()
    compatibility_date: str | None = None
    compatibility_flags: tuple[str, ...] = ()
    version: str = ""
    # Where staged code came from (``ember dev``): the worker's tracebacks name the files there,
    # the ones the user edits, not their staged copies. None: code_dir is the source.
    source_dir: Path | None = None
    # The packages the project declares (pyproject.toml, requirements.txt): the isolate names
    # the one an import missed. Read from the project, as a staged code_dir holds only modules.
    requirements: tuple[Requirement, ...] = ()
    # The project's requires-python: a SyntaxError is told about the interpreter when it is
    # excluded (isolate/syntax_note.py). None: not declared (or not known, ember serve).
    requires_python: str | None = None
    # Static assets in front of the worker (None: none). ``main`` is "" for assets only.
    assets: AssetsPolicy | None = None
    assets_dir: Path | None = None  # where the asset files are (read live in ember dev)
    # What env.NAME's error says about a missing name: a deployed worker (the default: ember
    # serve's versions) is told .dev.vars never reaches it; ember dev, which example file
    # lists a secret no secrets file sets (``secret_examples``).
    env_hints: MissingNameHints = MissingNameHints(deployed=True)

    def init_spec(self) -> dict[str, object]:
        """What the isolate receives in its Init frame (sent over its own socket only)."""
        return {
            "deployment_id": self.id,
            "name": self.name,
            "code_dir": str(self.code_dir),
            "main": self.main,
            "vars": dict(self.vars),
            "secrets": dict(self.secrets),
            "bindings": [b.to_wire() for b in self.bindings],
            "compatibility_date": self.compatibility_date,
            "compatibility_flags": list(self.compatibility_flags),
            "source_dir": str(self.source_dir) if self.source_dir else None,
            "requirements": [r.to_wire() for r in self.requirements],
            "requires_python": self.requires_python,
            "console_chars_per_s": self.limits.console_chars_per_s,
            "cpu_ms": self.limits.cpu_ms,  # the isolate meters each request against it
            "env_hints": self.env_hints.to_wire(),
        }

    def with_version(self, version: str) -> Deployment:
        """The same deployment labelled with another version."""
        return replace(self, version=version)


def deployment_from_project(
    config: ProjectConfig,
    *,
    deployment_id: str | None = None,
    registry: BindingRegistry | None = None,
    base_limits: Limits | None = None,
    stage: Path | None = None,
) -> Deployment:
    """Turn a parsed project into a Deployment; binding and cron errors name file and key
    (``check_project``: the checks a deploy of the same config makes).

    ``stage``: a directory to run the worker from, given the modules a deploy of ``config``
    uploads, at the names it uploads them by (``ember dev``), so a file the deploy leaves out
    cannot be imported or read in dev either. None: run from the project directory as it is."""
    bindings = check_project(config, registry).bindings
    code_dir, main, source_dir = config.root, config.main, None
    if stage is not None and config.has_worker:  # assets only: no modules, no worker
        modules = collect_modules(config)
        stage_modules(modules, stage)
        code_dir, main, source_dir = stage, modules[0].name, config.module_root
    python_project = read_python_project(config.root)
    assets = None
    if config.assets is not None:
        check_limits(
            config.assets.directory, str(config.file), config.where("assets") + ".directory"
        )
        assets = policy_of(
            config.assets,
            has_worker=config.has_worker,
            compatibility_date=config.compatibility_date,
            compatibility_flags=config.compatibility_flags,
        )
    return Deployment(
        id=deployment_id or config.name,
        name=config.name,
        code_dir=code_dir,
        main=main,
        source_dir=source_dir,
        requirements=python_project.requirements,
        requires_python=python_project.requires_python,
        vars=dict(config.vars),
        secrets=dict(config.secrets),
        bindings=bindings,
        limits=Limits.from_config(config.limits, base_limits),
        crons=config.crons,
        compatibility_date=config.compatibility_date,
        compatibility_flags=config.compatibility_flags,
        version=source_digest(config.root),
        assets=assets,
        assets_dir=config.assets.directory if config.assets is not None else None,
        env_hints=MissingNameHints(examples=secret_examples(config)),
    )


# Example secrets files, the usual way a project lists the secrets it needs (a committed copy
# of .dev.vars with the values left out); ember reads only their names.
EXAMPLE_FILES = (".dev.vars.example", ".env.example")


def secret_examples(config: ProjectConfig) -> dict[str, str]:
    """Names an example file in the project lists that neither a secrets file nor vars set,
    each with the file listing it. An example that does not parse is ignored: it is a hint."""
    from ember.dotenv import parse_dotenv
    from ember.errors import ConfigError

    found: dict[str, str] = {}
    for name in EXAMPLE_FILES:
        path = config.root / name
        try:
            listed = parse_dotenv(path) if path.is_file() else {}
        except (ConfigError, OSError, UnicodeDecodeError):
            continue
        for key in listed:
            if key not in config.secrets and key not in config.vars:
                found.setdefault(key, name)
    return found


def load_deployment(root: Path | str, **kwargs: object) -> Deployment:
    """``load_project`` then ``deployment_from_project``."""
    return deployment_from_project(load_project(root), **kwargs)  # type: ignore[arg-type]


def source_digest(root: Path) -> str:
    """A short digest of the project's Python sources (names a version in logs)."""
    digest = hashlib.blake2b(digest_size=6)
    for path in project_files(root, suffixes=(".py",)):
        digest.update(str(path.relative_to(root)).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            continue
    return digest.hexdigest()


def project_files(root: Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """Files of a project, skipping hidden directories, caches and virtual environments."""
    files = project_tree(root)[1]
    return files if suffixes is None else [p for p in files if p.name.endswith(suffixes)]


def project_tree(root: Path) -> tuple[list[Path], list[Path]]:
    """The directories and the files of a project (as ``project_files``), both sorted by walk."""
    dirs: list[Path] = []
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        dirs.append(Path(directory))
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("."))
        found.extend(Path(directory) / name for name in sorted(files))
    return dirs, found
