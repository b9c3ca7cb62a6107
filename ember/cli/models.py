"""``ember models``: the model catalog and what each model costs to serve.

torch is imported only inside ``inspect`` (``--help`` and ``list`` stay light).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ember.cli.failure import json_option
from ember.errors import ModelNotFound


@click.group()
def models() -> None:
    """List the models ember serves and inspect their size."""


@models.command("list")
@json_option("Print JSON.")
def list_models(as_json: bool) -> None:
    """Catalog ids, their architecture, context window and checkpoint state."""
    from ember.models.catalog import default_catalog, reference_configs

    rows = [
        {
            "id": e.model_id,
            "architecture": e.architecture,
            "context_window": e.context_window,
            "checkpoint": e.shipped,
            "built": e.is_built,
            "reference_config": e.reference_config,
        }
        for e in default_catalog()
    ]
    configs = sorted(reference_configs())
    if as_json:
        click.echo(json.dumps({"models": rows, "config_only": configs}, indent=2))
        return
    for row in rows:
        state = "built" if row["built"] else "not built yet"
        click.echo(
            f"{row['id']:<32} {row['architecture']:<22} {row['context_window']:>9,} tokens  "
            f"{row['checkpoint']} ({state})"
        )
    click.echo(f"config-only (inspect them by name): {', '.join(configs)}")


@models.command("inspect")
@click.argument("target")
@json_option("Print JSON.")
@click.option(
    "--int4-group-size", default=32, show_default=True, help="INT4 inputs per scale group."
)
@click.option(
    "--int4-scale-bytes", default=2, show_default=True, help="Bytes per INT4 scale (2 = BF16)."
)
def inspect(target: str, as_json: bool, int4_group_size: int, int4_scale_bytes: int) -> None:
    """Parameters, active parameters, weight bytes and KV bytes per token of TARGET.

    TARGET is a catalog id (@cf/...), a config-only name (kimi-k2, glm-5.2, ...) or a checkpoint
    directory / config.json path.
    """
    from ember.models.accounting import Int4Format, inspect_config
    from ember.models.config_parse import load_config

    if int4_group_size < 1 or int4_scale_bytes < 1:
        raise click.BadParameter("INT4 group size and scale bytes must be >= 1")
    path = _config_path(target)
    report = inspect_config(load_config(path), Int4Format(int4_group_size, int4_scale_bytes))
    if as_json:
        click.echo(json.dumps({"source": str(path)} | report.to_json(), indent=2))
        return
    for line in _describe(str(path), report):
        click.echo(line)


def _config_path(target: str) -> Path:
    from ember.models.catalog import CheckpointNotBuilt, default_catalog, reference_configs

    catalog, configs = default_catalog(), reference_configs()
    if target in catalog:
        entry = catalog.get(target)
        if entry.shipped is not None and not entry.is_built and entry.reference_config:
            raise CheckpointNotBuilt(
                f"{target}: the shipped checkpoint {entry.shipped!r} is not built yet; "
                f"`ember models inspect {entry.reference_config}` shows the full-size model"
            )
        return catalog.resolve(target).entry.checkpoint_dir / "config.json"
    if target in configs:
        return configs[target]
    path = Path(target)
    if path.exists():
        return path / "config.json" if path.is_dir() else path
    known = ", ".join([*catalog.ids(), *configs])
    raise ModelNotFound(f"{target!r} is no catalog id, config-only name or path; known: {known}")


def _describe(source: str, report) -> list[str]:  # noqa: ANN001 - accounting.Inspection
    p = report.parameters
    lines = [
        f"{report.architecture}  ({source})",
        f"parameters          {p.total:>18,}  ({p.total / 1e9:.2f} B)",
        f"active per token    {p.active_per_token:>18,}  ({p.active_per_token / 1e9:.2f} B; "
        "all but the routed experts, plus the top-k of them)",
    ]
    lines += [f"  {name:<17} {count:>18,}" for name, count in p.by_category.items() if count]
    if report.mtp_parameters:
        lines.append(f"MTP layers (skipped) {report.mtp_parameters:>17,}  (stored in checkpoints)")
    int4 = report.int4
    lines.append(
        f"weights             loaded model                 checkpoint incl. MTP layers   "
        f"(INT4: group {int4.group_size}, {int4.scale_bytes}-byte scales)"
    )
    for name, size in report.weight_bytes.items():
        ckpt = report.checkpoint_weight_bytes[name]
        bits = report.weight_bits_per_parameter[name]
        lines.append(
            f"  {name:<22} {size / 1e9:>8.1f} GB {size / 2**30:>8.1f} GiB   "
            f"{ckpt / 1e9:>8.1f} GB {ckpt / 2**30:>8.1f} GiB   {bits:.2f} bits/param"
        )
    lines.append("KV cache per token (one scale per tensor for FP8)")
    for dtype, kv in report.kv_bytes_per_token.items():
        extra = f" (attention {kv.attention:,} + indexer keys {kv.indexer:,})" if kv.indexer else ""
        lines.append(f"  {dtype:<5} {kv.total:>10,} B{extra}")
    return lines


def _register_serve() -> None:
    # `ember models serve` lives in its own module (the model server's CLI); torch-free to import.
    from ember.cli.models_serve import serve

    models.add_command(serve)


_register_serve()
