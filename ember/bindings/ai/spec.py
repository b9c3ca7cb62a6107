"""The AI binding type: the ``ai`` config section -> one ``BindingSpec``.

``ai: {binding: AI}`` (wrangler's ``[ai] binding = "AI"``) is all a worker needs. ember also
reads, under the same section, how the local model pool serves each model (``models``, see
``ember.models.pool.config``), its start policy and timings (``pool``) and the per-deployment AI
quotas (``limits``). They are validated here, at config load, so a typo names its key before
anything starts; they reach the supervisor's gateway as one JSON option. In ``ember serve`` the
operator's config owns the pool and a deployment's ``models`` section is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ember.bindings.ai.gateway import GatewayConfig
from ember.bindings.ai.quota import QuotaLimits
from ember.bindings.base import BindingSpec, BindingType, binding_name
from ember.config import ConfigSection
from ember.models.pool.config import parse_pool_config

CLIENT = "ember.bindings.ai.client:Ai"
SERVICE = "ember.bindings.ai.service:AIService"
SECTION_KEYS = frozenset({"binding", "models", "pool", "limits", "remote", "experimental_remote"})


def parse(section: ConfigSection) -> tuple[BindingSpec, ...]:
    """``ai: {binding: AI, models?: {...}, pool?: {...}, limits?: {...}}``."""
    value = section.value
    if not isinstance(value, dict):
        raise section.error(None, value, "a mapping such as {binding: AI}")
    name = binding_name(section, value, "")
    unknown = sorted(set(value) - SECTION_KEYS)
    if unknown:
        raise section.error(
            f".{unknown[0]}", unknown[0], "one of " + ", ".join(sorted(SECTION_KEYS))
        )
    gateway_config(value, section.file)  # validate now; the service parses it again
    raw = {k: value.get(k) for k in ("models", "pool", "limits") if value.get(k) is not None}
    options = {"config": json.dumps(raw, default=str), "file": section.file}
    return (BindingSpec(kind="ai", name=name, client=CLIENT, options=options),)


def gateway_config(value: dict[str, Any], file: str) -> GatewayConfig:
    """The section's pool and quota settings (ConfigError names the key)."""
    pool = parse_pool_config(
        value.get("models"), value.get("pool"), file=file, key="ai", base=Path(file).parent
    )
    limits = QuotaLimits.parse(value.get("limits"), file)
    return GatewayConfig(pool, limits, project_config=True)


def config_of(spec: BindingSpec) -> GatewayConfig:
    """The GatewayConfig a spec carries (validated when the config was loaded)."""
    raw = json.loads(str(spec.options.get("config") or "{}"))
    return gateway_config(raw, str(spec.options.get("file") or "ember.yaml"))


BINDING_TYPE = BindingType(
    kind="ai",
    config_key="ai",
    parse=parse,
    service=SERVICE,
    http="ember.bindings.ai.dev_mount:dev_mount",
    description="Workers AI, served by local Kimi and GLM models (ember.models.pool)",
)
