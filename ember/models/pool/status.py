"""What ``ember ai models`` shows of the pool: each model's ``ModelStatus``.

A mixin of ``ModelPool`` (as ``dispatch.FrameDispatch`` is of ``IsolateProcess``): it reads the
pool's config, catalog and replica groups, and caches each id's usable context (read from the
checkpoint's config.json once). Separate from ``pool.py`` so that the request path, where slots
are taken and given back, reads on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ember.errors import EmberError
from ember.models.catalog import Catalog
from ember.models.pool.admission import ModelGroup
from ember.models.pool.config import PoolConfig
from ember.models.pool.replica import ReplicaStatus, State


@dataclass(frozen=True, slots=True)
class ModelStatus:
    """What ``ember ai models`` shows of one model."""

    model_id: str
    architecture: str
    context_window: int  # the id's, as the Workers AI catalog lists it
    max_context: int  # what a request may use here: the window capped by the checkpoint
    checkpoint: str
    quantization: str
    kv_cache_dtype: str
    replicas: list[ReplicaStatus]
    queued: int
    configured: bool
    # The catalog's capability flags (all False for an id only attached by URL).
    function_calling: bool = False
    reasoning: bool = False
    vision: bool = False
    shipped: str | None = None  # the shipped checkpoint's name; None: the user's own / by URL

    @property
    def loaded(self) -> bool:
        return any(r.state == State.READY.value for r in self.replicas)


class PoolStatus:
    """The status half of ``ModelPool``."""

    # Set by ModelPool.__init__ (and configure); read here.
    config: PoolConfig
    catalog: Catalog
    _groups: dict[str, ModelGroup]
    _max_contexts: dict[str, int]

    if TYPE_CHECKING:  # defined by ModelPool

        def model_ids(self) -> list[str]: ...

    def status(self) -> list[ModelStatus]:
        """Every model the pool knows, with its replicas' state."""
        rows = []
        for model_id in self.model_ids():
            serving = self.config.serving(model_id)
            group = self._groups.get(model_id)
            replicas = [r.status() for r in group.replicas] if group is not None else []
            entry = self.catalog.get(model_id) if model_id in self.catalog else None
            first = serving.replicas[0]
            window = serving.context_window or (entry.context_window if entry else 0)
            # SGLang loading its own model_path serves that model, not the catalog's checkpoint.
            loads = first.model_path if first.backend == "sglang" and first.launched else None
            rows.append(
                ModelStatus(
                    model_id=model_id,
                    architecture=entry.architecture if entry else "(attached)",
                    context_window=window,
                    max_context=window if loads else self._max_context(model_id, window),
                    checkpoint=loads or (str(entry.checkpoint_dir) if entry else ""),
                    quantization=first.quantization or "none",
                    kv_cache_dtype=first.kv_cache_dtype or "auto",
                    replicas=replicas,
                    queued=group.queued if group is not None else 0,
                    configured=model_id in self.config.models,
                    function_calling=entry.function_calling if entry else False,
                    reasoning=entry.reasoning if entry else False,
                    vision=entry.vision if entry else False,
                    shipped=entry.shipped if entry and first.url is None and not loads else None,
                )
            )
        return rows

    def _max_context(self, model_id: str, window: int) -> int:
        """``window`` capped by the checkpoint's positions, as the model server caps it.

        The catalog lists the platform's windows (131,072 tokens for GLM-4.7-Flash); a small
        shipped checkpoint serves far fewer, and a user who trusted the catalog's figure would
        only learn it from a 5006. Read once per id (config.json), never the weights.
        """
        known = self._max_contexts.get(model_id)
        if known is not None:
            return known
        limit = window
        if model_id in self.catalog:
            try:
                limit = min(window, self.catalog.resolve(model_id).config.max_position_embeddings)
            except EmberError:
                return window  # not built or unreadable: the request path reports why
        self._max_contexts[model_id] = limit
        return limit
