"""``ember init NAME``: scaffold a worker project that runs with ``ember dev`` as is.

Its last line is the command to run next, written for how this ``ember`` was started, so it
works when pasted (``ember`` is often not on PATH: the README installs it in ``.venv/bin``).
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import click

from ember.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")

WORKER = '''"""{name}: a Python Worker. Run it with `ember dev`."""

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response(f"{{self.env.GREETING}} from {name}!")
'''

CONFIG = """name: {name}
main: worker.py
compatibility_date: "{date}"

vars:
  GREETING: Hello

# Uncomment to give the worker a KV namespace (stored under .ember/state):
# kv_namespaces:
#   - binding: KV

# Uncomment to call models with `await self.env.AI.run(model, inputs)`:
# ai:
#   binding: AI
"""

GITIGNORE = """.ember/
.dev.vars
__pycache__/
"""


@click.command()
@click.argument("name")
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Where to create the project directory.",
)
def init(name: str, parent: Path) -> None:
    """Create a new worker project NAME (worker.py, ember.yaml, .gitignore)."""
    if not _NAME.match(name):
        raise ConfigError("NAME", None, name, "letters, digits, '-' or '_', at most 63 characters")
    root = parent / name
    if root.exists() and any(root.iterdir()):
        raise ConfigError(str(root), None, "a non-empty directory", "a new or empty directory")
    root.mkdir(parents=True, exist_ok=True)
    # Today in UTC, as wrangler dates new projects: uploads refuse a date after UTC's today,
    # which a local date east of Greenwich already is for part of every day.
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    (root / "worker.py").write_text(WORKER.format(name=name))
    (root / "ember.yaml").write_text(CONFIG.format(name=name, date=date))
    (root / ".gitignore").write_text(GITIGNORE)
    click.echo(f"Created {root}/ with worker.py, ember.yaml and .gitignore.")
    click.echo(f"Next: cd {shlex.quote(str(root))} && {running_ember(root)} dev")


def running_ember(project: Path) -> str:
    """How to run the ``ember`` that is running now from inside ``project``: ``ember`` when the
    one on PATH is this one, else its path (the README installs into ``.venv/bin``, not on
    PATH), relative to ``project`` when both were given relative, as the README's quick start
    writes ``../.venv/bin/ember``; ``python -m ember`` names its python, with ``-P`` so that
    the project's own folders (one named ``ember``) are not on the import path."""
    script = Path(sys.argv[0])
    on_path = shutil.which("ember")
    if script.name == "__main__.py":  # python -m ember
        if on_path and Path(on_path).parent == Path(sys.executable).parent:
            return "ember"  # the console script of this same environment
        return f"{shlex.quote(sys.executable)} -P -m ember"
    if not script.is_file():
        return "ember"  # an embedding that does not say: the usual name
    if on_path and os.path.samefile(on_path, script):
        return "ember"
    if script.is_absolute() or project.is_absolute():
        return shlex.quote(os.path.abspath(script))
    return shlex.quote(os.path.relpath(script, project))
