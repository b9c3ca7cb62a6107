"""How the model list names a checkpoint for its reader: ``ember dev``'s user sees the path,
``ember serve``'s tenants (``operator_detail`` off) the directory name only: a path says how the
operator's host is laid out. A hub id (SGLang's ``--model-path zai-org/GLM-4.7``) is no path."""

from __future__ import annotations

import pytest

from ember.bindings.ai.model_rows import checkpoint_name
from ember.models.pool.status import ModelStatus


def _status(checkpoint: str, shipped: str | None = None) -> ModelStatus:
    return ModelStatus("@cf/a/b", "Glm4MoeForCausalLM", 8, 8, checkpoint, "none", "auto", [], 0,
                       True, shipped=shipped)  # fmt: skip


@pytest.mark.parametrize(
    ("checkpoint", "tenant_sees"),
    [
        ("/srv/models/private/glm-4.7-fp8", "glm-4.7-fp8"),
        ("/srv/models/private/glm-4.7-fp8/", "glm-4.7-fp8"),
        ("./ckpts/glm", "glm"),
        ("../ckpts/glm", "glm"),
        ("~/models/glm", "glm"),
        ("zai-org/GLM-4.7", "zai-org/GLM-4.7"),
        ("", "(attached by URL)"),
    ],
)
def test_a_tenant_sees_the_directory_name_and_the_user_the_path(
    checkpoint: str, tenant_sees: str
) -> None:
    assert checkpoint_name(_status(checkpoint), operator_detail=False) == tenant_sees
    mine = checkpoint_name(_status(checkpoint), operator_detail=True)
    assert mine == (checkpoint or "(attached by URL)")


def test_a_shipped_checkpoint_is_named_by_its_name_for_everyone() -> None:
    status = _status(
        "/usr/lib/python3/site-packages/ember/models/checkpoints/kimi-tiny", "kimi-tiny"
    )
    assert checkpoint_name(status, operator_detail=False) == "kimi-tiny"
    assert checkpoint_name(status, operator_detail=True) == "kimi-tiny"
