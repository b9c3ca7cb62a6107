"""``ember doctor``: which worker-sandbox layers this machine offers, and why not."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ember.cli.failure import json_option
from ember.cli.state_dir import resolve_state_dir, state_dir_option

if TYPE_CHECKING:
    from ember.runtime.sandbox import LayerReport
    from ember.runtime.sandbox.walls import WallCheck


@click.command()
@json_option("Print the report as JSON.")
@click.option(
    "--disable",
    default="",
    metavar="LAYERS",
    help="Comma-separated layers to report as forced off, as a platform config would "
    "(e.g. landlock,seccomp).",
)
@state_dir_option
def doctor(as_json: bool, disable: str, state_dir: Path | None) -> None:
    """Probe each sandbox layer in throwaway child processes and report it.

    Also says whether anonymous deployments (`ember deploy --temporary`) would be accepted:
    they need pid + net + mount namespaces and seccomp or Landlock (or seccomp and Landlock);
    and whether `ember serve` would start: a mount namespace or Landlock must keep every worker
    out of the platform's state directory (--state-dir, as `ember serve` is given it).
    """
    from ember.runtime.sandbox import parse_layers, probe

    report = probe(disabled=parse_layers(disable, source="--disable"))
    state = resolve_state_dir(state_dir)
    walls = _walls(report, state)
    if as_json:
        serve = {"state_dir": str(state), "starts": walls.met, "explanation": walls.explanation()}
        click.echo(json.dumps({**report.to_dict(), "serve": serve}, indent=2))
        return
    who = "root" if report.euid == 0 else f"uid {report.euid}, via a user namespace"
    abi = f"Landlock ABI {report.landlock_abi}" if report.landlock_abi else "no Landlock"
    click.echo(f"worker sandbox on Linux {report.kernel} ({who}; {abi}; Python {_python()})")
    width = max(len(status.layer.value) for status in report.statuses)
    for status in report.statuses:
        mark = "ok" if status.available else "--"
        click.echo(f"  [{mark}] {status.layer.value:<{width}}  {status.reason}")
    minimum = report.minimum()
    verdict = "accepted" if minimum.met else "REFUSED"
    click.echo(f"anonymous deployments (--temporary): {verdict}: {minimum.explanation}")
    # Name the directory when one was given: the verdict holds for it, not for the default.
    command = "ember serve" if state_dir is None else f"ember serve --state-dir {state}"
    click.echo(f"{command}: {_serve_verdict(walls)}")


def _walls(report: LayerReport, state: Path) -> WallCheck:
    """Whether ``ember serve`` with ``state`` would start here: some layer must keep every
    worker out of that state directory (``sandbox/walls.py``)."""
    from ember.runtime.sandbox import rootfs
    from ember.runtime.sandbox.walls import check_walls

    return check_walls(report.available(), report, state, rootfs.shared_read_paths())


def _serve_verdict(walls: WallCheck) -> str:
    if walls.met:
        return f"starts (workers {walls.explanation()})"
    return f"REFUSES to start ({walls.explanation()}), unless --trusted-workers"


def _python() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])
