"""What ``ember serve`` makes of the operator's ``ai`` section: configured ids only (unless the
operator opts back in), and failures that keep the operator's details out of tenants' sight;
``ember dev``'s pool keeps serving any catalog id."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ember.bindings.ai.gateway import GATEWAY_KEY, GatewayConfig
from ember.bindings.ai.spec import gateway_config
from ember.models.pool.config import parse_pool_config
from ember.runtime.platform.ai import configure_gateway
from ember.runtime.services import SharedResources

GLM = "@cf/zai-org/glm-4.7-flash"
UNLISTED = "@cf/zai-org/glm-5.3"


def _platform_pool(tmp_path: Path, section: dict | None):  # noqa: ANN202
    resources = SharedResources(tmp_path)
    config = gateway_config(section, "platform.yaml") if section is not None else None
    configure_gateway(resources, config)
    gateway = resources.shared(GATEWAY_KEY, lambda: None)
    assert gateway is not None
    return gateway.pool, resources


@pytest.mark.parametrize(
    ("section", "served"),
    [
        (None, False),  # no ai: section at all
        ({"models": {GLM: {}}}, False),
        ({"models": {GLM: {}}, "pool": {"serve_unconfigured": True}}, True),  # opted in
    ],
)
def test_ember_serve_serves_unlisted_catalog_ids_only_when_told(
    tmp_path: Path, section: dict | None, served: bool
) -> None:
    pool, resources = _platform_pool(tmp_path, section)
    try:
        assert pool.knows(UNLISTED) is served
        assert pool.config.settings.operator_detail is False
    finally:
        asyncio.run(resources.aclose())


def test_ember_devs_pool_serves_any_catalog_id() -> None:
    config = GatewayConfig(parse_pool_config({GLM: {}}))
    assert config.pool.serves_unconfigured and config.pool.settings.operator_detail
