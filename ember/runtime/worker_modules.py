"""A Worker's modules: the files ``ember deploy`` uploads and ``ember dev`` runs, one list.

``collect_modules`` walks the module root (``base_dir``, else the entry's directory) and keeps
what wrangler keeps for a Python Worker (workers-sdk ``find-additional-modules.ts``,
``findAdditionalModules``): the entry, each file a module rule matches (``ember.module_rules``),
typed by that rule, and every file of the project's ``python_modules/`` as Data but those
``python_modules.exclude`` names. Anything else (``secrets.json``, ``key.pem``, ``notes.md``
without a rule for it) is not a module: a deploy does not upload it and dev cannot read it.

``stage_modules`` writes the list into a directory laid out as the platform lays out an upload
(module names relative to it), which is where ``ember dev`` runs the worker from, as
``wrangler dev`` runs a no-bundle Worker from the modules it copied to its temporary directory.

Where ember walks less than wrangler, on purpose: hidden files and directories (``.dev.vars``,
``.env``, ``.git``, ``.venv``, ``.wrangler``, ``.ember``), ``__pycache__``, ``node_modules`` and
``venv`` are never modules (wrangler only skips ``.wrangler``, and ships a virtualenv's ``.py``
files when one sits under the module root); the project's config files never are either.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ember.config import CONFIG_FILES, ProjectConfig
from ember.errors import ConfigError
from ember.module_rules import CONTENT_TYPES, glob_matches, parse_rules

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "venv"})
VENDORED = "python_modules"


@dataclass(frozen=True, slots=True)
class WorkerModule:
    """One module: its name (relative to the module root), its rule type and its file."""

    name: str
    type: str  # PythonModule, Text, Data, CompiledWasm, ESModule, CommonJS
    path: Path

    @property
    def content_type(self) -> str:
        """The content type it is uploaded with (what the platform stores it as)."""
        return CONTENT_TYPES[self.type]


def collect_modules(config: ProjectConfig) -> tuple[WorkerModule, ...]:
    """The project's modules, entry first, then the ruled files and ``python_modules/``, each
    group in name order."""
    root = config.module_root
    entry = config.main_path.relative_to(root).as_posix()
    modules = [WorkerModule(entry, "PythonModule", config.main_path)]
    if not config.modules.find_additional_modules:
        return tuple(modules)  # wrangler's noBundleWorker then finds nothing else
    vendored = config.root / VENDORED
    if root != config.root and (root / VENDORED).is_dir():
        raise ConfigError(
            str(root / VENDORED),
            None,
            "a python_modules directory in the module root",
            f"python_modules/ at the project's root ({config.root}) only",
            hint="move it to the project's root, beside the config (wrangler refuses it too)",
        )
    rules, _ = parse_rules(config.modules.rules)
    configs = {(config.root / name).resolve() for name in CONFIG_FILES}
    for name, path in _files(root):
        if name == entry or path.resolve() in configs:
            continue
        if root == config.root and name.split("/", 1)[0] == VENDORED:
            continue  # vendored packages go up below, as Data, whatever their suffix
        rule = next((r for r in rules if r.matches(name)), None)
        if rule is not None:
            modules.append(WorkerModule(name, rule.type, path))
    if vendored.is_dir():
        exclude = config.modules.python_modules_exclude
        for name, path in _files(vendored):
            if not any(glob_matches(glob, name) for glob in exclude):
                modules.append(WorkerModule(f"{VENDORED}/{name}", "Data", path))
    return tuple(modules)


def _files(root: Path) -> list[tuple[str, Path]]:
    """Every file under ``root`` but the skipped ones, by ``/``-separated name, sorted."""
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in files:
            path = Path(directory) / name
            if not name.startswith(".") and path.is_file():
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def stage_modules(modules: tuple[WorkerModule, ...], dest: Path) -> None:
    """Make ``dest`` hold exactly ``modules`` at their names: a file copied only when its size
    or mtime changed (a reload copies what was edited), and files no longer modules removed."""
    wanted = {dest / m.name: m.path for m in modules}
    for target, source in wanted.items():
        info = source.stat()
        try:
            have = target.stat()
        except FileNotFoundError:
            have = None
        if have is None or (have.st_size, have.st_mtime_ns) != (info.st_size, info.st_mtime_ns):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for directory, _, files in os.walk(dest, topdown=False):
        for name in files:
            path = Path(directory) / name
            if path not in wanted:
                path.unlink()
        if Path(directory) != dest and not os.listdir(directory):
            os.rmdir(directory)
