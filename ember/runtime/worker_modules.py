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
files when one sits under the module root); the project's config files never are either; nor is
the static assets directory when it sits under the module root without holding the entry
(``ember init``'s ``public/`` beside ``worker.py``): its files go up as assets, and wrangler,
which walks it like any other directory, would upload its ``*.html`` again as Text modules.
Its Python templates keep the entry in ``src/`` and ``public/`` outside it, so a wrangler user
never sees that; ember's layout puts them side by side, so it leaves the directory out
instead. An assets directory that holds the entry holds the worker's code: it is walked, as
wrangler walks it.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ember.config import CONFIG_FILES, ProjectConfig
from ember.errors import ConfigError
from ember.module_rules import CONTENT_TYPES, first_rule, glob_matches, parse_rules
from ember.runtime.module_walk import DroppedLink, Fence, Tree, walk_trees
from ember.runtime.racy import RACY_NS, same_bytes

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


@dataclass(frozen=True, slots=True)
class ModuleScan:
    """The modules, and every directory walked to find them (``ember dev``'s watcher: a file
    added to one of them changes its mtime, and may be a module)."""

    modules: tuple[WorkerModule, ...]
    dirs: tuple[Path, ...]
    dropped: tuple[DroppedLink, ...] = ()  # folders left out, walked under another name

    def dropped_notes(self) -> list[str]:
        """A line per folder left out by the first-name rule: ``import alias`` fails at
        runtime, and would say nothing of why."""
        return [
            f"{d.name} is a link to the folder walked as {d.kept}: left out (its files are "
            f"modules once, under {d.kept}/; import them by that name)"
            for d in self.dropped
        ]


def collect_modules(config: ProjectConfig) -> tuple[WorkerModule, ...]:
    """The project's modules, entry first, then the ruled files and ``python_modules/``, each
    group in name order."""
    return collect_scan(config).modules


def collect_scan(config: ProjectConfig) -> ModuleScan:
    """``collect_modules``' walk, with the folders it left out (``ember deploy`` names them)."""
    root = config.module_root
    if (
        config.modules.find_additional_modules
        and root != config.root
        and (root / VENDORED).is_dir()
    ):
        raise ConfigError(
            str(root / VENDORED),
            None,
            "a python_modules directory in the module root",
            f"python_modules/ at the project's root ({config.root}) only",
            hint="move it to the project's root, beside the config (wrangler refuses it too)",
        )
    return scan_modules(config)


def scan_modules(config: ProjectConfig) -> ModuleScan:
    """``collect_modules`` without its refusal of a misplaced python_modules/ (walked as any
    directory), and the directories walked. ``ember dev`` reruns it when a watched path moved:
    a file no rule matches costs one glob match, no stat. Raises ConfigError for a folder link
    the walk refuses (``module_walk.py``)."""
    if not config.has_worker:  # assets only: nothing runs, so nothing is a module
        return ModuleScan((), ())
    root = config.module_root
    entry = config.main_path.relative_to(root).as_posix()
    modules = [WorkerModule(entry, "PythonModule", config.main_path)]
    dirs: list[Path] = []
    if not config.modules.find_additional_modules:
        return ModuleScan(tuple(modules), ())  # wrangler's noBundleWorker then finds nothing else
    vendored = config.root / VENDORED
    rule_for = first_rule(parse_rules(config.modules.rules)[0])
    configs: set[Path] = set()
    # python_modules/ has its own walk below; the assets directory goes up as assets.
    skip = {VENDORED} if root == config.root else set()
    assets = _assets_under(config, root)
    if assets is not None:
        skip.add(assets)
    home = _home()
    _refuse_a_walk_of_home(config, home)
    fence = Fence.around(module_root=root, project_root=config.root, home_folder=home)
    # One walk for both: a folder reached from each (``lib -> python_modules/pkg``) goes up once.
    trees = [Tree(root, skip=frozenset(skip))]
    if vendored.is_dir():
        trees.append(Tree(vendored, prefix=VENDORED + "/"))
    walk = walk_trees(tuple(trees), dirs, fence)
    for name, where in walk.files[0]:
        if name == entry or (rule := rule_for(name)) is None:
            continue
        # A Path, stat'ed and resolved only once matched: most files of a project are no module.
        path = Path(where)
        configs = configs or {(config.root / name).resolve() for name in CONFIG_FILES}
        if (real := _real_file(path)) is not None and real not in configs:
            modules.append(WorkerModule(name, rule.type, path))
    exclude = config.modules.python_modules_exclude
    for name, where in walk.files[1] if len(walk.files) > 1 else ():
        path = Path(where)
        below = name.removeprefix(VENDORED + "/")
        if not any(glob_matches(glob, below) for glob in exclude) and path.is_file():
            modules.append(WorkerModule(name, "Data", path))
    return ModuleScan(tuple(modules), tuple(dirs), walk.dropped)


def left_out_notes(config: ProjectConfig) -> list[str]:
    """``ember dev``'s lines for the folder links the first-name rule left out, as a deploy
    names them (one more walk, at start and after each reload only); none while a link is
    refused: the reload reported that."""
    try:
        return scan_modules(config).dropped_notes()
    except ConfigError:
        return []


def _home() -> Path | None:
    """The user's home folder (None where there is none to find)."""
    try:
        return Path.home()
    except RuntimeError:
        return None


def _refuse_a_walk_of_home(config: ProjectConfig, home: Path | None) -> None:
    """A project at (or above) the home folder, or at ``/``, walks every file there: its
    ``~/.ssh`` would be "inside the project", and any file a module rule picks a module. The
    module root is inside the project (``base_dir`` may not leave it)."""
    real = os.path.realpath(config.root)
    held = os.path.realpath(home) if home is not None else None
    if real == os.sep:
        found = "the project's root is the filesystem root"
    elif held is not None and (held == real or held.startswith(real + os.sep)):
        found = f"the project's root ({real}) is or holds your home folder ({held})"
    else:
        return
    raise ConfigError(
        str(config.file),
        None,
        f"{found}: every file there would be walked",
        "a project in a folder of its own",
        hint="move the project (its config and code) into a folder of its own, e.g. ~/projects/app",
    )


def _real_file(path: Path) -> Path | None:
    """``path`` resolved, if it is a regular file or a link to one. None, not an error, for a
    link that loops (``ln -s loop.py loop.py``) or goes nowhere, or a file removed since the
    walk: such a name is no module (wrangler would fail reading it; ember skipped it before it
    resolved names)."""
    try:
        return path.resolve() if path.is_file() else None
    except (OSError, RuntimeError):  # resolve() raises RuntimeError for a loop (Python 3.11)
        return None


def _assets_under(config: ProjectConfig, root: Path) -> str | None:
    """The assets directory's ``/``-separated path below ``root`` (``public``); None when there
    is none, or it is outside ``root``, or it is ``root`` itself or holds the entry: then the
    worker's code is in it too, and the module rules decide what is a module there, as in
    wrangler (which walks the whole module root whatever the assets directory is)."""
    if config.assets is None:
        return None
    directory = config.assets.directory.resolve()
    base = root.resolve()
    if not directory.is_relative_to(base) or config.main_path.resolve().is_relative_to(directory):
        return None
    return directory.relative_to(base).as_posix()


def stage_modules(modules: tuple[WorkerModule, ...], dest: Path) -> None:
    """Make ``dest`` hold exactly ``modules`` at their names: a file copied only when it may
    differ from its copy (a reload copies what was edited), and files no longer modules
    removed. Size and mtime differ after most edits; ``touch -r``, ``rsync -t`` or two saves
    in one timestamp tick keep both, never the ctime: a source whose ctime is not RACY_NS
    older than its copy's (the copy's ctime is when it was made) is compared by content.
    A copy made within RACY_NS of its source's last change would be compared on every reload
    for good (its ctime never moves): once a compare finds it equal and the source's ctime is
    past the window, the copy's ctime is moved to now, so its stat is trusted from then on."""
    wanted = {dest / m.name: m.path for m in modules}
    for target, source in wanted.items():
        info = source.stat()  # before the read: a save during the copy leaves a newer stat
        try:
            have = target.stat()
        except FileNotFoundError:
            have = None
        same_stat = have is not None and (have.st_size, have.st_mtime_ns) == (
            info.st_size,
            info.st_mtime_ns,
        )
        if same_stat and info.st_ctime_ns < have.st_ctime_ns - RACY_NS:
            continue  # changed before the copy was made, and not since
        if same_stat and same_bytes(str(source), str(target)):
            if have is not None and info.st_ctime_ns < time.time_ns() - RACY_NS:
                # A change to the source from now on moves its ctime past the copy's new one;
                # setting the times it has moves only the copy's ctime.
                os.utime(target, ns=(have.st_atime_ns, have.st_mtime_ns))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        shutil.copymode(source, target)
        # The stat read before the copy, not copy2's after it: a save between the two would
        # leave old bytes under the new mtime, and look copied.
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    for directory, _, files in os.walk(dest, topdown=False):
        for name in files:
            path = Path(directory) / name
            if path not in wanted:
                path.unlink()
        if Path(directory) != dest and not os.listdir(directory):
            os.rmdir(directory)
