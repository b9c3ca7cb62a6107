"""The AI gateway compiles the schemas of the requests it validates (on the supervisor, whose
event loop serves every worker and tenant): off that loop, one at a time, and a queued batch's
requests within one automaton budget. Before, 20 requests of distinct costly patterns in one
28 KB batch held the supervisor's loop for 7.9 s, and 1,000 of them (the batch limit) would
have held it for minutes; one ``env.AI.run`` with 40 such tools held it ~0.45 s."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest

from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.quota import QuotaLimits
from ember.bindings.ai.tenant import Tenant
from ember.models.pool.config import parse_pool_config
from tests.models.pool.gate_server import gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"


def _gateway(url: str) -> AIGateway:
    pool = parse_pool_config({MODEL: {"url": url}}, {"health_interval_s": 0.05})
    return AIGateway(GatewayConfig(pool, QuotaLimits(), project_config=False), progress=print)


def _tools(salt: str, tools: int = 1, patterns: int = 40) -> list[dict]:
    # About 2,000 states a pattern, 80,000 a tool of 40: two such tools fit the 200,000-state
    # budget, three do not. ``salt``: schemas no earlier compile remembered.
    out = []
    for t in range(tools):
        properties = {
            f"p{i}": {"type": "string", "pattern": f"^[0-9a-f]{{1000}}-{salt}-{t}-{i}$"}
            for i in range(patterns)
        }
        parameters = {"type": "object", "properties": properties, "required": list(properties)}
        out.append({"type": "function", "function": {"name": f"f{t}", "parameters": parameters}})
    return out


def _chat(tools: list[dict]) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "tools": tools, "max_tokens": 4}


def test_a_batch_draws_on_one_budget_and_a_repeated_schema_counts_once() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            queue = parse_run_options({"queueRequest": True}, MODEL)
            tenant = Tenant.alone("batcher")
            # Two requests of two tools each: each request fits, the two together do not.
            distinct = {"requests": [_chat(_tools(uuid.uuid4().hex, 2)) for _ in range(2)]}
            with pytest.raises(AIRequestFailed) as refused:
                await gateway.run(tenant, MODEL, distinct, queue)
            failure = refused.value.failure
            assert failure.code.code == 5006
            assert "/requests/1/tools/" in failure.description
            assert "per queued batch" in failure.description
            # The same two tools in three requests: compiled, and charged, once.
            same = _chat(_tools(uuid.uuid4().hex, 2))
            queued = (await gateway.run(tenant, MODEL, {"requests": [same] * 3}, queue)).json()
            assert queued["status"] == "queued"
            await gateway.aclose()

    asyncio.run(main())


async def _ticks_during(call: Callable[[], Awaitable[object]]) -> tuple[list[float], float, float]:
    """Run ``call`` while a task notes the time each turn of the loop; the ticks, and when the
    call started and ended."""
    ticks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.002)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    start = time.monotonic()
    try:
        await call()
    except AIRequestFailed:
        pass  # refused past the budget: what is timed is the compile that found it
    end = time.monotonic()
    done.set()
    await task
    return ticks, start, end


@pytest.mark.parametrize("form", ["one call", "queued batch"])
def test_the_supervisor_loop_turns_while_a_call_compiles(form: str) -> None:
    """The loop takes turns in the middle of the compile (40-90% of the call's time): on the
    loop, it took none until the compile ended. The compile holds the GIL, so turns come at
    the interpreter's switch interval, not at once: three tries, each with fresh schemas."""

    async def main() -> list[str]:
        misses = []
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            tenant = Tenant.alone("heavy")
            for _ in range(3):
                if form == "one call":
                    inputs = _chat(_tools(uuid.uuid4().hex, 3))  # refused at the third tool
                    options = parse_run_options(None, MODEL)
                else:
                    salt = uuid.uuid4().hex
                    inputs = {"requests": [_chat(_tools(salt + str(r))) for r in range(3)]}
                    options = parse_run_options({"queueRequest": True}, MODEL)
                call = functools.partial(gateway.run, tenant, MODEL, inputs, options)
                ticks, start, end = await _ticks_during(call)
                low, high = start + 0.4 * (end - start), start + 0.9 * (end - start)
                middle = [t for t in ticks if low <= t <= high]
                if len(middle) >= 3:
                    break
                misses.append(f"{end - start:.2f} s, {len(middle)} turns in its middle")
            else:
                return misses
            await gateway.aclose()
        return []

    assert asyncio.run(main()) == []
