"""``--state-dir``: where a platform keeps its state, one option for every command that asks
about it (``ember serve`` runs there; ``ember doctor`` checks that ``serve`` could)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ember.runtime.deployments.config import default_state_dir

state_dir_option: Callable[[Callable[..., Any]], Callable[..., Any]] = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the platform keeps its state (default: $EMBER_STATE_DIR, else "
    "$XDG_DATA_HOME/ember/platform).",
)


def resolve_state_dir(option: Path | None) -> Path:
    """``--state-dir``, else the default, as an absolute path with links resolved."""
    return (option or default_state_dir()).resolve()
