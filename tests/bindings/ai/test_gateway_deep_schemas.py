"""A schema nested thousands of levels deep, handed to the gateway's Python API (a dict built in
Python: no parser bounded its depth), is the request's 400 / 5006 naming where it passes the
bound, not a RecursionError on the schema lane answered 503 / 3040 "internal error; please try
again" (review42); and the lane serves the next request."""

from __future__ import annotations

import asyncio

import pytest

from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.quota import QuotaLimits
from ember.bindings.ai.tenant import Tenant
from ember.models.constrain.schema_depth import MAX_DEPTH
from ember.models.pool.config import parse_pool_config
from tests.models.pool.gate_server import gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def _bodies(depth: int) -> dict[str, tuple[dict, str]]:
    hi = [{"role": "user", "content": "hi"}]
    response_format = {"type": "json_schema", "json_schema": {"name": "n", "schema": None}}
    response_format["json_schema"]["schema"] = _nested(depth)  # type: ignore[index]
    tool = {"type": "function", "function": {"name": "f", "parameters": _nested(depth)}}
    return {
        "response_format": (
            {"messages": hi, "response_format": response_format, "max_tokens": 4},
            "/response_format/json_schema/schema/properties/a",
        ),
        "tools": ({"messages": hi, "tools": [tool], "max_tokens": 4}, "/tools/0/function/"),
    }


@pytest.mark.parametrize("where", ["response_format", "tools"])
def test_a_deep_python_built_schema_is_a_400_naming_the_field(where: str) -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            pool = parse_pool_config({MODEL: {"url": double.url}}, {"health_interval_s": 0.05})
            gateway = AIGateway(GatewayConfig(pool, QuotaLimits(), project_config=False))
            options = parse_run_options(None, MODEL)
            tenant = Tenant.alone("deep")
            body, field = _bodies(3000)[where]
            with pytest.raises(AIRequestFailed) as refused:
                await gateway.run(tenant, MODEL, body, options)
            failure = refused.value.failure
            assert (failure.status, failure.code.code) == (400, 5006), failure
            assert field in failure.description
            assert f"nested at most {MAX_DEPTH} levels deep" in failure.description
            # The lane serves on (tools: the double's answer is no JSON for a response_format).
            shallow, _ = _bodies(3)["tools"]
            answer = await gateway.run(tenant, MODEL, shallow, options)
            assert answer.status == 200
            await gateway.aclose()

    asyncio.run(main())
