"""Whether MODEL names something to load at all: a catalog id or a directory with a config.json.

Its own module, free of torch, so that ``ember models serve`` refuses a MODEL that is neither
before it imports torch and the engine (~2 CPU-seconds) and takes its port: a model pool whose
replica's checkpoint went away pays that on every retry of the replica."""

from __future__ import annotations

from pathlib import Path

from ember.errors import ModelNotFound
from ember.models.catalog import Catalog, default_catalog


def unknown_model(model: str, catalog: Catalog | None = None) -> ModelNotFound | None:
    """The error for a MODEL that is neither a catalog id nor a checkpoint directory; else None
    (a catalog id whose checkpoint is not built is for the loader to name)."""
    catalog = catalog if catalog is not None else default_catalog()
    if model in catalog or (Path(model).expanduser() / "config.json").is_file():
        return None
    return ModelNotFound(
        f"{model!r} is neither a catalog id nor a checkpoint directory "
        f"(no config.json there); catalog ids: {', '.join(catalog.ids())}"
    )
