"""The AI gateway compiles the schemas of the requests it validates (on the supervisor, whose
event loop serves every worker and tenant): off that loop, one at a time, and a queued batch's
requests within one automaton budget. Before, 20 requests of distinct costly patterns in one
28 KB batch held the supervisor's loop for 7.9 s, and 1,000 of them (the batch limit) would
have held it for minutes; one ``env.AI.run`` with 40 such tools held it ~0.45 s."""

from __future__ import annotations

import asyncio
import functools
import os
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest

from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig, shared_gateway
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.quota import QuotaLimits
from ember.bindings.ai.responses_front import create_response
from ember.bindings.ai.tenant import Tenant
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA
from ember.models.constrain.schema_check import KNOWN_SCHEMAS, schema_key
from ember.models.pool.config import parse_pool_config
from tests.models.pool.gate_server import gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"
OSS = "@cf/openai/gpt-oss-20b"
OPTIONS = parse_run_options(None, MODEL)


def _gateway(url: str) -> AIGateway:
    pool = parse_pool_config({MODEL: {"url": url}}, {"health_interval_s": 0.05})
    return AIGateway(GatewayConfig(pool, QuotaLimits(), project_config=False), progress=print)


def _tools(salt: str, tools: int = 1, patterns: int = 40) -> list[dict]:
    # About 5,100 units of work a pattern, 205,000 a tool of 40: two such tools fit the
    # 600,000-unit budget, three do not. ``salt``: schemas no earlier compile remembered.
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


def _responses(tools: list[dict], model: str | None = None) -> dict:
    """The Responses form of ``_chat``'s request (its tools flat, as the Responses API has
    them)."""
    flat = [{"type": "function", **tool["function"]} for tool in tools]
    return {
        "input": "hi",
        "tools": flat,
        "max_output_tokens": 4,
        **({"model": model} if model else {}),
    }


def test_a_responses_form_batch_draws_on_the_batch_budget_too() -> None:
    # review38: a Responses-form item was parsed with a budget of its own.
    async def main() -> None:
        with gate_servers("oss") as (double,):
            double.open()
            pool = parse_pool_config({OSS: {"url": double.url}}, {"health_interval_s": 0.05})
            gateway = AIGateway(GatewayConfig(pool, QuotaLimits(), project_config=False))
            assert gateway.schema(OSS) == "responses"
            queue = parse_run_options({"queueRequest": True}, OSS)
            items = [_responses(_tools(uuid.uuid4().hex, 2)) for _ in range(2)]
            with pytest.raises(AIRequestFailed) as refused:
                await gateway.run(Tenant.alone("oss"), OSS, {"requests": items}, queue)
            assert "per queued batch" in refused.value.failure.description
            await gateway.aclose()

    asyncio.run(main())


def test_a_tenant_over_its_quota_is_refused_before_its_schemas_compile() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            pool = parse_pool_config({MODEL: {"url": double.url}}, {"health_interval_s": 0.05})
            limits = QuotaLimits(requests_per_minute=1)
            gateway = AIGateway(GatewayConfig(pool, limits, project_config=False))
            options = parse_run_options(None, MODEL)
            tenant = Tenant.alone("thrifty")
            await gateway.run(tenant, MODEL, {"prompt": "hi"}, options)  # its one a minute
            tools = _tools(uuid.uuid4().hex, 1)
            with pytest.raises(AIRequestFailed) as limited:
                await gateway.run(tenant, MODEL, _chat(tools), options)
            assert limited.value.failure.code.code == 3036
            key = schema_key(tools[0]["function"]["parameters"], False)
            assert key not in KNOWN_SCHEMAS._seen  # never compiled
            # ...where another tenant's same call compiles it (the key is the one looked for).
            await gateway.run(Tenant.alone("other"), MODEL, _chat(tools), options)
            assert key in KNOWN_SCHEMAS._seen
            await gateway.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("callers", ["one tenant", "four workers of one account"])
def test_a_tenant_waits_for_its_own_turn_not_for_every_job_of_another(callers: str) -> None:
    """Four costly calls of one tenant, then another tenant's call: it is parsed after at most
    one of them (each tenant has one job on the lane at a time), not after all four. An
    account's workers are one tenant there (review39: each worker took a turn of its own)."""

    def tenant(name: str) -> Tenant:
        if callers == "one tenant" or name == "B":
            return Tenant.alone(name[0])
        return Tenant.of_worker("account-a", f"worker-{name}")

    async def main() -> list[str]:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            options = parse_run_options(None, MODEL)
            done: list[str] = []

            async def call(name: str, inputs: dict) -> None:
                try:
                    await gateway.run(tenant(name), MODEL, inputs, options)
                except AIRequestFailed:
                    pass  # refused past the budget, after its compile
                done.append(name)

            heavy = [
                asyncio.create_task(call(f"A{i}", _chat(_tools(uuid.uuid4().hex, 3))))
                for i in range(4)
            ]
            await asyncio.sleep(0.05)  # A's four are waiting for the lane
            await call("B", _chat(_tools(uuid.uuid4().hex, 1, patterns=1)))
            await asyncio.gather(*heavy)
            await gateway.aclose()
            return done

    done = asyncio.run(main())
    assert done.index("B") <= 2, done


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
    except (AIRequestFailed, InvalidRequestField):
        pass  # refused past the budget: what is timed is the compile that found it
    end = time.monotonic()
    done.set()
    await task
    return ticks, start, end


@pytest.mark.parametrize("form", ["one call", "queued batch", "REST responses"])
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
                options = parse_run_options(None, MODEL)
                if form == "one call":
                    inputs = _chat(_tools(uuid.uuid4().hex, 3))  # refused at the third tool
                    call = functools.partial(gateway.run, tenant, MODEL, inputs, options)
                elif form == "queued batch":
                    salt = uuid.uuid4().hex
                    inputs = {"requests": [_chat(_tools(salt + str(r))) for r in range(3)]}
                    options = parse_run_options({"queueRequest": True}, MODEL)
                    call = functools.partial(gateway.run, tenant, MODEL, inputs, options)
                else:  # POST /ai/v1/responses (review38: parsed on the loop)
                    body = _responses(_tools(uuid.uuid4().hex, 3), MODEL)
                    call = functools.partial(create_response, gateway, tenant, body, options)
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


def test_the_supervisors_gateway_compiles_in_the_worker_process_until_closed(
    own_compile_worker: None,
) -> None:
    """``shared_gateway`` (the supervisor's) builds automata in the compile worker, so a costly
    pattern holds none of the supervisor's GIL; closing it stops the worker."""

    class Host:
        def __init__(self) -> None:
            self.objects: dict[object, object] = {}

        def shared(self, key: object, factory):  # noqa: ANN001, ANN202
            return self.objects.setdefault(key, factory())

    async def main() -> None:
        gateway = shared_gateway(Host())
        worker = SHARED_AUTOMATA.worker
        assert worker is not None
        tenant = Tenant.alone("worker")
        with pytest.raises(AIRequestFailed):  # refused past the budget, compiled by the worker
            await gateway.run(tenant, MODEL, _chat(_tools(uuid.uuid4().hex, 3)), OPTIONS)
        pid = worker.pid
        assert worker.starts == 1 and pid is not None
        await gateway.aclose()
        assert SHARED_AUTOMATA.worker is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # stopped and reaped

    asyncio.run(main())


def test_a_call_waiting_for_its_turn_at_close_gets_a_retry_not_a_crash() -> None:
    # review39: it met the shut-down thread pool's RuntimeError (a 500 naming nothing).
    async def main() -> list[object]:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            tenant = Tenant.alone("closing")

            async def call() -> object:
                inputs = _chat(_tools(uuid.uuid4().hex, 3))
                try:
                    return await gateway.run(tenant, MODEL, inputs, OPTIONS)
                except AIRequestFailed as failed:
                    return failed.failure

            first = asyncio.create_task(call())
            await asyncio.sleep(0.05)  # the first on the lane, compiling
            second = asyncio.create_task(call())  # waits for the tenant's turn
            await asyncio.sleep(0.01)
            await gateway.aclose()
            return list(await asyncio.gather(first, second))

    first, second = asyncio.run(main())
    assert first.code.code == 5006  # it ran: refused past the budget, as it would have been
    assert second.code.code == 3040 and "shutting down" in second.description
