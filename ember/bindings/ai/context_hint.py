"""What a context-length refusal adds when the limit is the local checkpoint's, not the id's.

A worker written for ``@cf/zai-org/glm-4.7-flash`` (131,072 tokens on the platform) gets "This
model's maximum context length is 4096 tokens" from the local stand-in, which reads as if the
platform model were that small. The refusal says whose limit it is and where it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.bindings.ai.model_rows import checkpoint_name
from ember.models.pool.status import ModelStatus


def local_context_hint(
    model: str, statuses: Sequence[ModelStatus], operator_detail: bool = True
) -> str:
    """`` (...)`` to append to the refusal, or "" when the local limit is the id's own;
    ``operator_detail`` off (``ember serve``): the checkpoint named without its host path."""
    status = next((s for s in statuses if s.model_id == model), None)
    if status is None or status.max_context >= status.context_window:
        return ""
    return (
        f" ({status.max_context} tokens is the limit of the local checkpoint serving {model} "
        f"here ({checkpoint_name(status, operator_detail)}); the platform's model takes "
        f'{status.context_window}. A replica\'s --context-length in ai.models."{model}".args '
        "raises it up to what the checkpoint's positions allow.)"
    )
