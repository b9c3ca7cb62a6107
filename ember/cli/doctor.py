"""``ember doctor``: which worker-sandbox layers this machine offers, and why not."""

from __future__ import annotations

import json
import sys

import click


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
    they need pid + net + mount namespaces and seccomp or Landlock (or seccomp and Landlock).
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


def _python() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])
