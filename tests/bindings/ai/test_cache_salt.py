"""Each tenant's ``cache_salt`` (``cache_salt.py``): what the gateway sends every replica.

With the platform's key (``ember serve``) every request of a tenant, whatever the front (the
binding's ``run``, a stream, the OpenAI-compatible chat, a queued batch), carries the tenant's
salt, and no other tenant's; without one (``ember dev``) no request carries any. A caller's own
``cache_salt`` is never forwarded: it could otherwise name another tenant's.
"""

from __future__ import annotations

import asyncio
import re

from ember.bindings.ai.cache_salt import tenant_salt
from ember.bindings.ai.gateway import AIGateway, GatewayConfig
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.tenant import Tenant
from ember.models.pool.config import parse_pool_config
from tests.models.pool.gate_server import GateServer, gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"
KEY = bytes(range(32))


def test_a_salt_is_a_keyed_digest_of_the_scope() -> None:
    salt = tenant_salt(KEY, "account:abc")
    assert salt is not None and re.fullmatch(r"[0-9a-f]{64}", salt)
    assert tenant_salt(KEY, "account:abc") == salt, "stable: the cache still works"
    assert tenant_salt(KEY, "account:abd") != salt
    assert tenant_salt(bytes(32), "account:abc") != salt, "another platform's key, another salt"
    assert tenant_salt(None, "account:abc") is None


def _gateway(url: str, key: bytes | None) -> AIGateway:
    pool = parse_pool_config({MODEL: {"url": url}}, {"health_interval_s": 0.05})
    config = GatewayConfig(pool, project_config=False, cache_salt_key=key)
    return AIGateway(config, progress=lambda line: None)


async def _calls(gateway: AIGateway, double: GateServer, tenant: Tenant) -> list[dict]:
    """One call of ``tenant`` through each front; the bodies the replica got for them."""
    before = len(double.seen)
    none = parse_run_options(None, MODEL)
    await gateway.run(tenant, MODEL, {"prompt": "hi"}, none)
    streamed = await gateway.run(tenant, MODEL, {"prompt": "hi", "stream": True}, none)
    assert streamed.stream is not None
    async for _ in streamed.stream:
        pass
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    await gateway.chat(tenant, {**chat, "cache_salt": "chosen-by-the-caller"}, none)
    queue = parse_run_options({"queueRequest": True}, MODEL)
    await gateway.run(tenant, MODEL, {"requests": [{"prompt": "hi"}]}, queue)
    for _ in range(400):  # the batch runs after its caller left
        if len(double.seen) == before + 4:
            break
        await asyncio.sleep(0.025)
    return double.seen[before:]


def test_every_request_of_a_tenant_carries_its_salt_and_only_its_own() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url, KEY)
            a = Tenant.of_account("aaa")
            b = Tenant.of_worker("bbb", "some-worker")
            seen_a = await _calls(gateway, double, a)
            seen_b = await _calls(gateway, double, b)
            await gateway.aclose()
        salt_a, salt_b = tenant_salt(KEY, a.data), tenant_salt(KEY, b.data)
        assert salt_a != salt_b
        assert [body.get("cache_salt") for body in seen_a] == [salt_a] * 4
        assert [body.get("cache_salt") for body in seen_b] == [salt_b] * 4
        # One account's worker and its REST calls share the account's part of the cache.
        assert salt_b == tenant_salt(KEY, Tenant.of_account("bbb").data)

    asyncio.run(main())


def test_without_a_key_no_request_carries_a_salt() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url, None)
            seen = await _calls(gateway, double, Tenant.alone("project"))
            await gateway.aclose()
        assert len(seen) == 4 and all("cache_salt" not in body for body in seen)

    asyncio.run(main())
