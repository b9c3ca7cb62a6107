"""The model list's rows (``env.AI.models()``, ``/ai/v1/models``, ``ember ai models``).

Two kinds of facts side by side, never mixed: the platform catalog's capability flags
(``function_calling``, ``reasoning``, ``vision``: what the id does on Workers AI, kept as the
catalog says so a worker's feature checks behave as they will once deployed) and, under
``ember``, what ember itself serves for the id here: which checkpoint, and what it accepts.
ember's engine reads text only, so ``ember.vision`` is false even where the platform model
reads images (an ``image_url`` part is refused with a 5006 that says so).

On ``ember serve`` (``operator_detail`` off) tenants read these rows: a checkpoint is named by
its directory, never by where the operator keeps it, and an attached replica by its kind, never
its address (``/health`` shows no addresses either). ``ember dev`` shows its one user the path.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from ember.bindings.ai.model_schema import schema_of
from ember.models.pool.pool import ModelPool
from ember.models.pool.status import ModelStatus


def model_rows(pool: ModelPool) -> list[dict[str, Any]]:
    return [_row(pool, s) for s in pool.status()]


def checkpoint_name(status: ModelStatus, operator_detail: bool) -> str:
    """The checkpoint serving the id, as its reader may see it: a shipped one's name; the
    operator's own by its directory name unless ``operator_detail`` (a path, absolute or
    relative, says how the host is laid out; a hub id such as ``zai-org/GLM-4.7`` does not)."""
    if status.shipped is not None:
        return status.shipped
    if not status.checkpoint:
        return "(attached by URL)"
    if operator_detail or not _is_path(status.checkpoint):
        return status.checkpoint
    return PurePath(status.checkpoint).name


def _is_path(text: str) -> bool:
    return text.startswith(("/", "~", ".", "\\")) or PurePath(text).is_absolute()


def _replica_kind(describe: str, operator_detail: bool) -> str:
    """``attached http://10.0.0.5:30000`` -> ``attached`` for a tenant (config.describe)."""
    if operator_detail or not describe.startswith("attached "):
        return describe
    return "attached"


def served_here(status: ModelStatus, operator_detail: bool = True) -> dict[str, Any]:
    """What ember serves for the id: the checkpoint and what a request to it may carry."""
    shipped = status.shipped is not None
    return {
        # The shipped checkpoints are ~10M-parameter models trained in this repo: text shaped
        # like their training data, the real architecture, not the real model's answers.
        "checkpoint": checkpoint_name(status, operator_detail),
        "shipped": shipped,
        "vision": False,  # ember's engine and the gateway read text parts only
        # Tools are served through the chat template and a constrained tool-call grammar for
        # every catalog id; an id attached by URL calls tools as its backend does.
        "function_calling": True,
        "reasoning": status.reasoning,
    }


def _row(pool: ModelPool, s: ModelStatus) -> dict[str, Any]:
    serving = pool.config.serving(s.model_id)
    detail = pool.config.settings.operator_detail
    return {
        "id": s.model_id,
        "architecture": s.architecture,
        "context_window": s.context_window,
        "max_context": s.max_context,
        "quantization": s.quantization,
        "kv_cache_dtype": s.kv_cache_dtype,
        "replicas": [
            # An ejected replica (outlier.py) is ready but out of rotation: said so.
            {
                "state": "ejected" if r.ejected else r.state,
                "describe": _replica_kind(r.describe, detail),
                "restarts": r.restarts,
            }
            for r in s.replicas
        ]
        or [
            {"state": "stopped", "describe": _replica_kind(d.describe(), detail), "restarts": 0}
            for d in serving.replicas
        ],
        "loaded": s.loaded,
        "queued": s.queued,
        # The platform catalog's flags for the id (see the module docstring).
        "function_calling": s.function_calling,
        "reasoning": s.reasoning,
        "vision": s.vision,
        # The Workers AI schema env.AI.run answers this id in (model_schema.py).
        "ember": {**served_here(s, detail), "schema": schema_of(s.model_id, serving.schema)},
    }
