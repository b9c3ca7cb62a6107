"""``ember doctor``: which worker-sandbox layers this machine offers, and why not."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ember.runtime.sandbox import LayerReport


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--disable",
    default="",
    metavar="LAYERS",
    help="Comma-separated layers to report as forced off, as a platform config would "
    "(e.g. landlock,seccomp).",
)
def doctor(as_json: bool, disable: str) -> None:
    """Probe each sandbox layer in throwaway child processes and report it.

    Also says whether anonymous deployments (`ember deploy --temporary`) would be accepted:
    they need pid + net + mount namespaces and seccomp or Landlock (or seccomp and Landlock);
    and whether `ember serve` would start: a mount namespace or Landlock must keep every worker
    out of the platform's state directory.
    """
    from ember.runtime.sandbox import parse_layers, probe

    report = probe(disabled=parse_layers(disable, source="--disable"))
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
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
    click.echo(f"ember serve: {_serve_verdict(report)}")


def _serve_verdict(report: LayerReport) -> str:
    """Whether ``ember serve`` would start here: some layer must keep every worker out of the
    state directory (``sandbox/walls.py``), or the operator must pass --trusted-workers."""
    from ember.runtime.deployments.config import default_state_dir
    from ember.runtime.sandbox import rootfs
    from ember.runtime.sandbox.walls import check_walls

    walls = check_walls(report.available(), report, default_state_dir(), rootfs.shared_read_paths())
    if walls.met:
        return f"starts (workers {walls.explanation()})"
    return f"REFUSES to start ({walls.explanation()}), unless --trusted-workers"


def _python() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])
