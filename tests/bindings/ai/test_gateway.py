"""The gateway's own policies, against protocol-level replica doubles: per-tenant quotas,
tenant-scoped cache and batches, and stream translation into each dialect."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from ember.bindings.ai.dialects import (
    StreamTranslator,
    openai_stream,
    reference_translation,
    workers_stream,
)
from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.quota import QuotaBook, QuotaLimits
from ember.bindings.ai.tenant import Tenant
from ember.models.api.sse import parse_sse
from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import CapacityExceeded
from tests.models.pool.gate_server import gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"
INPUTS = {"prompt": "hi"}


def _gateway(url: str, limits: QuotaLimits | None = None) -> AIGateway:
    pool = parse_pool_config({MODEL: {"url": url}}, {"health_interval_s": 0.05})
    config = GatewayConfig(pool, limits or QuotaLimits(), project_config=False)
    return AIGateway(config, progress=lambda line: None)


def test_quota_book_rate_and_concurrency_with_a_clock() -> None:
    now = [0.0]
    book = QuotaBook(QuotaLimits(requests_per_minute=2, concurrent_requests=1), lambda: now[0])
    release = book.acquire("a")
    with pytest.raises(CapacityExceeded) as concurrent:
        book.acquire("a")
    assert concurrent.value.code.code == 3036 and "in flight" in str(concurrent.value)
    book.acquire("b")()  # another tenant is not affected
    release()
    book.acquire("a")()
    with pytest.raises(CapacityExceeded) as rate:
        book.acquire("a")
    assert rate.value.retry_after == pytest.approx(30.0)
    assert "2 AI requests per minute" in str(rate.value)
    now[0] = 30.0
    book.acquire("a")()


def test_a_tenant_over_quota_gets_3036_and_others_keep_going() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url, QuotaLimits(requests_per_minute=3))
            options = parse_run_options(None, MODEL)
            for _ in range(3):
                await gateway.run(Tenant.alone("greedy"), MODEL, INPUTS, options)
            with pytest.raises(AIRequestFailed) as limited:
                await gateway.run(Tenant.alone("greedy"), MODEL, INPUTS, options)
            failure = limited.value.failure
            assert failure.code.code == 3036 and failure.status == 429
            assert failure.headers()["retry-after"] == "20"
            answer = await gateway.run(Tenant.alone("polite"), MODEL, INPUTS, options)
            assert answer.json()["model"] == MODEL
            await gateway.aclose()

    asyncio.run(main())


def test_cache_and_batches_are_scoped_to_their_tenant() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            cached = parse_run_options({"gateway": {"id": "g", "cacheTtl": 60}}, MODEL)
            first = await gateway.run(Tenant.alone("a"), MODEL, INPUTS, cached)
            again = await gateway.run(Tenant.alone("a"), MODEL, INPUTS, cached)
            other = await gateway.run(Tenant.alone("b"), MODEL, INPUTS, cached)
            assert first.headers["cf-aig-cache-status"] == "MISS"
            assert again.headers["cf-aig-cache-status"] == "HIT"
            assert other.headers["cf-aig-cache-status"] == "MISS"
            assert len(double.seen) == 2
            queue = parse_run_options({"queueRequest": True}, MODEL)
            queued = (
                await gateway.run(Tenant.alone("a"), MODEL, {"requests": [INPUTS]}, queue)
            ).json()
            none = parse_run_options(None, MODEL)
            with pytest.raises(AIRequestFailed) as foreign:
                await gateway.run(
                    Tenant.alone("b"), MODEL, {"request_id": queued["request_id"]}, none
                )
            assert foreign.value.failure.code.code == 5006
            await gateway.aclose()

    asyncio.run(main())


async def _events(*payloads: object):  # noqa: ANN202
    for payload in payloads:
        yield payload if isinstance(payload, str) else json.dumps(payload)


def _collect(stream) -> list[object]:  # noqa: ANN001
    async def main() -> bytes:
        return b"".join([chunk async for chunk in stream])

    return parse_sse(asyncio.run(main()))


CHUNK = {"object": "chat.completion.chunk", "model": "served", "choices": [{"delta": {}}]}
USAGE = {"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 1}}


def test_workers_stream_ends_with_usage_event_and_done() -> None:
    events = _collect(workers_stream(_events(CHUNK, USAGE, "[DONE]"), MODEL))
    assert events[0]["model"] == MODEL  # renamed to the caller's id
    assert events[1] == {"response": "", "usage": {"prompt_tokens": 1}}
    assert events[2] == "[DONE]"


def test_workers_stream_chunks_carry_no_null_usage() -> None:
    # The replica writes "usage": null on every chunk (include_usage, as OpenAI does); Workers
    # AI's chunks carry a usage object or none, and langchain-cloudflare sums every "usage" it
    # finds (None.items() broke its streaming).
    for separators in ((",", ":"), (", ", ": ")):
        chunk = json.dumps({**CHUNK, "model": MODEL, "usage": None}, separators=separators)
        events = _collect(workers_stream(_events(chunk, USAGE, "[DONE]"), MODEL))
        assert events[0] == {**CHUNK, "model": MODEL}
        named = json.dumps({**CHUNK, "usage": None}, separators=separators)
        events = _collect(workers_stream(_events(named, USAGE, "[DONE]"), MODEL))
        assert events[0] == {**CHUNK, "model": MODEL}
    kept = _collect(openai_stream(_events({**CHUNK, "model": MODEL, "usage": None}), MODEL))
    assert kept[0]["usage"] is None  # OpenAI's own chunks carry it


def test_workers_stream_turns_a_replica_error_into_errors() -> None:
    error = {"error": {"message": "KV cache exhausted", "type": "server_error", "code": None}}
    events = _collect(workers_stream(_events(CHUNK, error), MODEL))
    assert events[1] == {"errors": [{"code": 3040, "message": "KV cache exhausted"}]}
    assert events[2] == "[DONE]"


def test_openai_stream_passes_chunks_through() -> None:
    named = {**CHUNK, "model": MODEL}
    events = _collect(openai_stream(_events(named, USAGE, "[DONE]"), MODEL))
    assert events == [named, USAGE, "[DONE]"]


def _random_stream(rng: random.Random) -> list[str]:
    """Replica events as ember's server or SGLang may write them (compact or spaced JSON)."""
    events = []
    texts = ["hi", ' "usage":{"x":1} ', ',"usage":null', '{"error": 1}', "ü", "", "data: [DONE]"]
    for _ in range(rng.randint(0, 8)):
        delta = {rng.choice(["content", "reasoning_content"]): rng.choice(texts)}
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": rng.choice([MODEL, "served-name"]),
            "choices": [
                {"index": 0, "delta": delta, "finish_reason": rng.choice([None, None, "length"])}
            ],
        }
        if rng.random() < 0.3:
            chunk["usage"] = None
        events.append(chunk)
    if rng.random() < 0.5:
        events.append({"object": "chat.completion.chunk", "choices": [], "usage": {"n": 1}})
    if rng.random() < 0.2:
        events.append({"error": {"message": "boom", "code": rng.choice([None, 3040, "x"])}})
    separators = rng.choice([(",", ":"), (", ", ": ")])
    encoded = [
        json.dumps(e, separators=separators, ensure_ascii=rng.random() < 0.5) for e in events
    ]
    if rng.random() < 0.8:
        encoded.append("[DONE]")
    return encoded


@pytest.mark.parametrize(
    ("dialect", "hide_usage"), [("workers", False), ("openai", False), ("openai", True)]
)
def test_translator_fast_path_matches_the_reference_on_random_streams(
    dialect: str, hide_usage: bool
) -> None:
    # hide_usage: the platform asked the replica for usage (a metered account), the caller not.
    rng = random.Random()
    for _ in range(300):
        events = _random_stream(rng)
        rename = any('"model":"served-name"' in e or '"model": "served-name"' in e for e in events)
        json_inputs = rng.choice([None, {"max_tokens": 40}])  # JSON Mode, or not
        translator = StreamTranslator(dialect, MODEL, rename, json_inputs, hide_usage)
        fast = b"".join(translator.feed(e) for e in events) + translator.end()
        expected = reference_translation(events, dialect, MODEL, json_inputs, hide_usage)
        assert parse_sse(fast) == expected, events
        if hide_usage:
            assert all("usage" not in e for e in expected if isinstance(e, dict)), events


def test_quota_slots_come_back_after_whole_answers_and_unread_streams() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            gateway = _gateway(double.url, QuotaLimits(concurrent_requests=1))
            options = parse_run_options(None, MODEL)
            double.open()
            for _ in range(3):  # one at a time, each gives its slot back
                await gateway.run(Tenant.alone("t"), MODEL, INPUTS, options)
            double.opened = False
            double.gate = None  # hold the next requests again
            answer = await gateway.run(
                Tenant.alone("t"), MODEL, {**INPUTS, "stream": True}, options
            )
            assert gateway.quotas.in_flight("t") == 1
            await asyncio.sleep(0.1)
            assert double.held == 1
            await answer.stream.aclose()  # never read: still frees the replica, slot and quota
            for _ in range(100):
                if double.held == 0:
                    break
                await asyncio.sleep(0.02)
            assert double.held == 0
            assert gateway.quotas.in_flight("t") == 0
            assert gateway.pool.group(MODEL).outstanding == 0
            await gateway.aclose()

    asyncio.run(main())


def test_the_replica_sees_the_gateways_request_id_and_never_the_tenants() -> None:
    # cf-ai-req-id, as x-request-id: the id a replica's --log-requests line shows, so one
    # request is followed across processes; a tenant's own x-request-id cannot forge it.
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            for extra in ({}, {"X-Request-Id": "forged"}):
                options = parse_run_options({"extraHeaders": extra}, MODEL)
                answer = await gateway.run(Tenant.alone("t"), MODEL, INPUTS, options)
                sent = {k.lower(): v for k, v in double.headers[-1].items()}
                assert sent["x-request-id"] == answer.headers["cf-ai-req-id"], sent
            await gateway.aclose()

    asyncio.run(main())


def test_only_x_and_cf_headers_reach_a_replica_and_framing_headers_never() -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            hostile = {
                "x-session-affinity": "s1",
                "cf-aig-metadata": "m",
                "content-length": "0",
                "transfer-encoding": "chunked",
                "host": "elsewhere",
                "authorization": "Bearer secret",
            }
            options = parse_run_options({"extraHeaders": hostile}, MODEL)
            answer = await gateway.run(
                Tenant.alone("t"), MODEL, {**INPUTS, "stream": True}, options
            )
            assert [c async for c in answer.stream][-1].endswith(b"data: [DONE]\n\n")
            seen = double.headers[-1]
            assert seen["x-session-affinity"] == "s1" and seen["cf-aig-metadata"] == "m"
            assert "authorization" not in seen and "transfer-encoding" not in seen
            assert seen["host"].startswith("127.0.0.1:")
            assert seen["content-length"] == str(
                len(json.dumps(double.seen[-1], separators=(",", ":")).encode())
            )
            await gateway.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("dialect", ["workers", "openai"])
def test_a_lora_adapter_is_refused_with_5005_not_silently_ignored(dialect: str) -> None:
    # Kimi and GLM take no LoRA adapters on the platform: asking for one is 5005 (405), and
    # answering from the base model instead would hide that the adapter was never applied.
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            options = parse_run_options(None, MODEL)
            inputs = {**INPUTS, "lora": "my-finetune"}
            with pytest.raises(AIRequestFailed) as refused:
                if dialect == "workers":
                    await gateway.run(Tenant.alone("a"), MODEL, inputs, options)
                else:
                    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
                    await gateway.chat(Tenant.alone("a"), {**body, "lora": "my-finetune"}, options)
            failure = refused.value.failure
            assert (failure.code.code, failure.status) == (5005, 405)
            assert failure.message == f"5005: The model {MODEL} does not support LoRa inference"
            queue = parse_run_options({"queueRequest": True}, MODEL)
            with pytest.raises(AIRequestFailed) as batched:
                await gateway.run(Tenant.alone("a"), MODEL, {"requests": [inputs]}, queue)
            assert batched.value.failure.code.code == 5005
            assert double.seen == []  # nothing reached the replica
            await gateway.run(
                Tenant.alone("a"), MODEL, {**INPUTS, "lora": None}, options
            )  # null: no adapter
            await gateway.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("inputs", "options", "message"),
    [
        (
            {"requests": []},
            {"queueRequest": True},
            "Invalid value at '/requests': expected an array of 1 to 1000 requests, "
            "got an array of 0 items",
        ),
        (
            {"prompt": "x"},
            {"queueRequest": True},
            "Invalid value at '/requests': expected an array of 1 to 1000 requests, got nothing",
        ),
        (
            {"requests": [5]},
            {"queueRequest": True},
            "Invalid value at '/requests/0': expected an object, got a number (5)",
        ),
        (
            {"requests": [{"prompt": "x"}]},
            None,
            "Invalid value at '/requests': an async batch is sent with "
            "options.queueRequest set to true (the third argument of env.AI.run; over REST, "
            "?queueRequest=true)",
        ),
    ],
)
def test_batch_errors_say_what_was_expected_in_the_users_terms(
    inputs: dict, options: dict | None, message: str
) -> None:
    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            gateway = _gateway(double.url)
            with pytest.raises(AIRequestFailed) as refused:
                await gateway.run(
                    Tenant.alone("a"), MODEL, inputs, parse_run_options(options, MODEL)
                )
            assert refused.value.failure.message == f"5006: Error: {message}"
            await gateway.aclose()

    asyncio.run(main())


def test_queued_batches_are_refused_where_the_platform_catalog_says_async_queue_false() -> None:
    """review22: kimi-k2.5's catalog entry has async_queue false, kimi-k2.6's true; code that
    queues a batch on kimi-k2.5 would fail on the platform, so it fails here too, naming the id
    that takes batches. Polls are not refused."""
    k25, k26 = "@cf/moonshotai/kimi-k2.5", "@cf/moonshotai/kimi-k2.6"

    async def main() -> None:
        with gate_servers("glm") as (double,):
            double.open()
            pool = parse_pool_config({k25: {"url": double.url}, k26: {"url": double.url}})
            gateway = AIGateway(GatewayConfig(pool, QuotaLimits(), project_config=False))
            batch = {"requests": [INPUTS]}
            with pytest.raises(AIRequestFailed) as refused:
                await gateway.run(
                    Tenant.alone("a"), k25, batch, parse_run_options({"queueRequest": True}, k25)
                )
            message = refused.value.failure.message
            assert message.startswith(f"5006: Error: Invalid value at '/': {k25} does not take")
            assert f"async_queue false; {k26} does" in message, message
            queued = await gateway.run(
                Tenant.alone("a"), k26, batch, parse_run_options({"queueRequest": True}, k26)
            )
            assert queued.json()["status"] == "queued"
            with pytest.raises(AIRequestFailed) as unknown:  # a poll: no such batch, not refused
                await gateway.run(
                    Tenant.alone("a"), k25, {"request_id": "nope"}, parse_run_options(None, k25)
                )
            assert "no queued request" in unknown.value.failure.message
            await gateway.aclose()

    asyncio.run(main())
