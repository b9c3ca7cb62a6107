"""Placeholder for binding types whose service is not part of this build (the AI binding).

``ai: {binding: AI}`` must never break ``ember dev``: ``env.AI`` exists, nothing model-related
loads or blocks, and ``await env.AI.run(...)`` raises a clear error. ``ember/bindings/ai``
replaces this type by exporting its own ``BINDING_TYPE`` (see ``registry.BUILTIN_TYPES``).
"""

from __future__ import annotations

from typing import Any

from ember.bindings.base import BindingChannel, BindingSpec, BindingType, binding_name
from ember.config import ConfigSection
from ember.errors import BindingError

CLIENT = "ember.bindings.unavailable:UnavailableBinding"


class UnavailableBinding:
    """``env.<NAME>`` for a binding whose service is not available: every call raises."""

    def __init__(self, spec: BindingSpec, channel: BindingChannel) -> None:
        self._name = spec.name
        self._reason = str(spec.options.get("reason", "its service is not available"))

    def _fail(self) -> BindingError:
        return BindingError(f"env.{self._name}: {self._reason}")

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """Workers AI's ``run``: raises, explaining that no model service is configured."""
        raise self._fail()

    async def models(self, *args: Any, **kwargs: Any) -> Any:
        """Workers AI's ``models``: raises like ``run``."""
        raise self._fail()

    def __repr__(self) -> str:
        return f"<unavailable binding {self._name}>"


def _parse_ai(section: ConfigSection) -> tuple[BindingSpec, ...]:
    if not isinstance(section.value, dict):
        raise section.error(None, section.value, "a mapping such as {binding: AI}")
    name = binding_name(section, section.value, "")
    reason = (
        "the AI binding is not configured: this ember build has no model service "
        "(ember.bindings.ai is not installed)"
    )
    return (BindingSpec(kind="ai", name=name, client=CLIENT, options={"reason": reason}),)


AI_BINDING_TYPE = BindingType(
    kind="ai",
    config_key="ai",
    parse=_parse_ai,
    service=None,
    description="Workers AI (placeholder until the model service is installed)",
)
