"""The 5007 for an id nobody serves says the smallest config that serves it: a catalog id needs
only to be listed (``ai: {models: {"<id>": {}}}``: ember runs its shipped checkpoint), an id
the catalog lacks needs a checkpoint directory."""

from __future__ import annotations

from pathlib import Path

from ember.bindings.ai.unknown_model import no_such_model
from ember.models.catalog import SHIPPED_CHECKPOINTS
from ember.models.pool.config import parse_pool_config

GLM = "@cf/zai-org/glm-4.7-flash"
OTHER = "@cf/meta/llama-3.1-8b-instruct"


def test_a_catalog_id_on_the_platform_needs_only_to_be_listed() -> None:
    failure = no_such_model(GLM, [], project_config=False, in_catalog=True)
    text = failure.description
    assert failure.code.code == 5007 and text.startswith(f"No such model {GLM} or task. ")
    assert f'ai: {{models: {{"{GLM}": {{}}}}}}' in text, text
    assert "ember serve --config" in text and "checkpoint" not in text, text
    assert "ember serves no model here" in text


def test_a_catalog_id_in_a_project_needs_only_to_be_listed() -> None:
    text = no_such_model(GLM, ["@cf/zai-org/glm-5.2"], project_config=True, in_catalog=True)
    assert f'ai.models."{GLM}": {{}}' in text.description, text.description
    assert f'[ai.models."{GLM}"]' in text.description  # wrangler.toml's form
    assert "checkpoint" not in text.description
    assert "ember serves @cf/zai-org/glm-5.2 here" in text.description


def test_an_id_the_catalog_lacks_needs_a_checkpoint() -> None:
    for project_config in (True, False):
        text = no_such_model(OTHER, [GLM], project_config, in_catalog=False).description
        assert f'ai.models."{OTHER}".checkpoint: <checkpoint directory>' in text, text
        assert "config.json, *.safetensors and tokenizer.json" in text


def test_an_id_the_catalog_lacks_names_the_shipped_checkpoints_in_a_project_only() -> None:
    """A project author porting a worker that calls a model the catalog lacks learns how to
    try it on a shipped tiny checkpoint: by its name, which the config resolves (a path would
    reach the handler as /lib/python/ember/..., the isolate's name for ember's install); the
    platform's tenants are not told (they cannot change the operator's config)."""
    hint = f'ai.models."{OTHER}".checkpoint: glm4moe-tiny (or kimi-tiny, glmdsa-tiny)'
    assert hint in no_such_model(OTHER, [], True, in_catalog=False).description
    assert "glm4moe-tiny" not in no_such_model(OTHER, [], False, in_catalog=False).description
    for project_config in (True, False):
        text = no_such_model(OTHER, [], project_config).description
        assert str(SHIPPED_CHECKPOINTS) not in text, text
    config = parse_pool_config({OTHER: {"checkpoint": "glm4moe-tiny"}}, base=Path("/nowhere"))
    assert config.serving(OTHER).checkpoint == SHIPPED_CHECKPOINTS / "glm4moe-tiny"
