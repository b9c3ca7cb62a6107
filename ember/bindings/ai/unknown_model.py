"""The 5007 for a model id nobody serves here, with what ember serves and how to serve it.

Workers AI's text comes first, unchanged (``5007: No such model <id> or task``: scripts match
it); what follows is ember's: the ids served here and the smallest config that serves the id (a
project's ``ai.models`` in ``ember dev``, the operator's on ``ember serve``): an id of ember's
catalog needs only to be listed (its shipped checkpoint runs), any other id a checkpoint directory.
"""

from __future__ import annotations

from ember.bindings.ai.failures import Failure
from ember.models.api.errors import NO_SUCH_MODEL


def no_such_model(
    model: str, served: list[str], project_config: bool, in_catalog: bool = False
) -> Failure:
    """The failure for ``model``; ``served``: the ids answered here; ``project_config``: the
    project configures the pool (``ember dev``, ``ember ai run``), not the operator;
    ``in_catalog``: ember's catalog knows the id (listing it is enough to serve it)."""
    hint = unknown_model_hint(model, served, project_config, in_catalog)
    if not model.startswith("@") and model.startswith(("cf/", "hf/")):
        # A path written .../ai/run/cf/... (the '@' dropped, or lost to URL encoding).
        hint = f"Did you mean '@{model}'? Workers AI ids start with '@'. {hint}"
    description = f"{NO_SUCH_MODEL.describe(model=model)}. {hint}"
    # "/model": the OpenAI-compatible body's field (its error names it in ``param``).
    return Failure(NO_SUCH_MODEL, description, field="/model", hint=hint)


def unknown_model_hint(
    model: str, served: list[str], project_config: bool, in_catalog: bool = False
) -> str:
    """What ember serves, and the smallest config that would serve ``model`` here."""
    listed = ", ".join(served) if served else "no model"
    if in_catalog:
        how = (
            f'list it in the project\'s config (ai.models."{model}": {{}} in ember.yaml; '
            f'[ai.models."{model}"] in wrangler.toml)'
            if project_config
            else f"list it in the platform's config (ember serve --config FILE, with "
            f'ai: {{models: {{"{model}": {{}}}}}}): ask its operator'
        )
        return (
            f"ember serves {listed} here. {model} is in ember's catalog, so naming it is "
            f"enough to answer it here: {how}."
        )
    key = f'ai.models."{model}".checkpoint: <checkpoint directory>'
    where = (
        f'in the project\'s config ({key}; in wrangler.toml [ai.models."{model}"] checkpoint = ...)'
        if project_config
        else f"in the platform's config (ember serve --config, {key}): ask its operator"
    )
    shipped = ""
    if project_config:  # never on ember serve: tenants do not see the operator's paths
        # By name, not by path: the isolate shows ember's install path as /lib/python/ember.
        shipped = (
            f" To try the code with one of ember's own tiny models, name it as the checkpoint: "
            f'ai.models."{model}".checkpoint: glm4moe-tiny (or kimi-tiny, glmdsa-tiny).'
        )
    return (
        f"ember serves {listed} here. To answer {model} here, map it to a local checkpoint "
        f"{where}; a checkpoint directory holds config.json, *.safetensors and "
        f"tokenizer.json.{shipped}"
    )
