"""What ``ember dev`` watches: the files whose change changes the worker it runs, nothing else.

As ``wrangler dev`` watches a Worker's module graph, its config and its ``.dev.vars`` / ``.env``
files, ember watches what a reload would read: the modules the module rules pick (the entry,
the ruled files under the module root, ``python_modules/``; ``worker_modules.scan_modules``,
the same walk that stages them), the directories walked for them (a new file in one may be a
module), every config and secrets file ``load_project`` looks for, and the Python project
files the isolate names a missing package from. A file no rule picks (``dev.log`` from
``ember dev > dev.log``, notes, build output) reloads nothing, however often it is written.
Static assets are not watched: they are read from their directory per request.
"""

from __future__ import annotations

from ember.config import ProjectConfig
from ember.errors import ConfigError
from ember.python_project import PYPROJECT, REQUIREMENTS
from ember.runtime.module_walk import LinkRefused
from ember.runtime.watcher import WatchList
from ember.runtime.worker_modules import ModuleScan, scan_modules


def dev_watch_list(config: ProjectConfig) -> WatchList:
    """The files and directories a change in which means ``config``'s worker must reload."""
    try:
        scan = scan_modules(config)
    except LinkRefused as refused:
        # A link the walk refuses (``src/pkg/up -> ../../..``): the reload reports it and keeps
        # serving the previous version; until it is removed, the config and the folders walked
        # up to it, its own among them, are watched (its removal moves its folder's mtime,
        # and that folder may be below the roots), not the modules.
        scan = ModuleScan((), (config.root, config.module_root, *refused.dirs))
    except ConfigError:
        scan = ModuleScan((), (config.root, config.module_root))
    python_project = (config.root / PYPROJECT, config.root / REQUIREMENTS)
    files = [*config.watched_files(), *python_project, *(m.path for m in scan.modules)]
    # The root: a config or dotenv file created there is seen by its mtime (watcher.py).
    dirs = scan.dirs if config.root in scan.dirs else (config.root, *scan.dirs)
    return WatchList(files=tuple(dict.fromkeys(files)), dirs=tuple(dict.fromkeys(dirs)))
