"""``AIGateway``: one per supervisor; every AI request of every tenant goes through it.

It owns the model pool, the response cache and logs (``options.gateway``), queued batches
(``queueRequest``), the per-tenant quotas and each account's neurons per day (``neurons.py``:
checked before admission, counted from each answer's usage), and turns a request in either
dialect into an ``AIAnswer`` (JSON bytes or a byte stream in the caller's event format) or an
``AIRequestFailed`` carrying the Workers AI code. The binding's service (one per deployment)
and the REST and OpenAI-compatible routes are thin fronts over ``run`` and ``chat``.
Batches (submit, poll, each queued request) are in ``gateway_batches.py``, and counting each
call (metrics, the operator's log, failures) in ``gateway_accounting.py``, both mixed in.

    gateway = shared_gateway(host)            # ServiceHost.shared: one per supervisor
    answer = await gateway.run(Tenant.alone("t"), model, inputs, options)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.bindings.ai.answer import AIAnswer, AIRequestFailed, answer_headers, cached_answer
from ember.bindings.ai.answer_stream import AnswerStream, translate
from ember.bindings.ai.batches import BatchQueue
from ember.bindings.ai.cache import ResponseCache, cache_key
from ember.bindings.ai.cache_salt import tenant_salt
from ember.bindings.ai.call_log import CallObserver, when_done
from ember.bindings.ai.classic import classic_inputs, classic_limits, classic_result
from ember.bindings.ai.classic_schema import check_classic
from ember.bindings.ai.dialects import completion_result, is_streaming, upstream_request
from ember.bindings.ai.failures import Failure, failure_of
from ember.bindings.ai.fields import platform_sampling_defaults
from ember.bindings.ai.gateway_accounting import GatewayAccounting
from ember.bindings.ai.gateway_batches import GatewayBatches
from ember.bindings.ai.gateway_logs import GatewayLogs
from ember.bindings.ai.json_mode import json_mode_failure_description, json_mode_miss, wants_json
from ember.bindings.ai.model_rows import model_rows
from ember.bindings.ai.model_schema import Schema, schema_of
from ember.bindings.ai.named_tool import named_tool_result
from ember.bindings.ai.neurons import NeuronBook
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.quota import QuotaBook, QuotaLimits
from ember.bindings.ai.raw_prompt import as_chat_completion
from ember.bindings.ai.responses_bridge import responses_answer
from ember.bindings.ai.schema_lane import SchemaLane
from ember.bindings.ai.tally import UNKNOWN_MODEL, AITally
from ember.bindings.ai.tenant import Tenant, fairness_of
from ember.bindings.ai.thinking import (
    cut_short_note,
    mandatory_effort,
    reasoning_cut_short,
)
from ember.bindings.ai.unknown_fields import (
    input_notes,
    misspelt_prompt,
    unknown_options_note,
    with_ignored_fields,
)
from ember.bindings.ai.unknown_model import no_such_model
from ember.errors import InvalidModelInput
from ember.models.api.chat_request import Dialect
from ember.models.api.errors import JSON_MODE_NOT_MET
from ember.models.api.responses_call import ResponsesCall
from ember.models.api.responses_store import ResponseStore
from ember.models.constrain.compile_client import in_process_wanted
from ember.models.pool.config import PoolConfig
from ember.models.pool.pool import ModelPool, stderr_progress
from ember.models.pool.upstream import upstream_refusal

GATEWAY_KEY = "ai.gateway"


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The pool, the quotas, whether projects may configure the pool (``ember dev``), and the
    key of each tenant's cache salt (``ember serve``'s: ``cache_salt.py``; None: no salt)."""

    pool: PoolConfig = field(default_factory=PoolConfig)
    limits: QuotaLimits = field(default_factory=QuotaLimits)
    project_config: bool = True
    cache_salt_key: bytes | None = field(default=None, repr=False)


class AIGateway(GatewayBatches, GatewayAccounting):
    """See the module docstring."""

    def __init__(
        self,
        config: GatewayConfig | None = None,
        *,
        progress: Callable[[str], None] = stderr_progress,
        clock: Callable[[], float] = time.time,
        compile_worker: bool = False,
    ) -> None:
        """``compile_worker``: see ``SchemaLane`` (the supervisor's gateway has one)."""
        self.config = config or GatewayConfig()
        self._progress = progress  # the dev console: notes about requests (thinking.py)
        self.pool = ModelPool(self.config.pool, progress=progress)
        self.cache = ResponseCache()
        self.responses = ResponseStore()  # /ai/v1/responses, one scope per tenant
        self.quotas = QuotaBook(self.config.limits)
        self.neurons = NeuronBook(clock)  # each account's per UTC day (``clock``: the seam)
        self.batches = BatchQueue(self._run_batch_item)
        self.logs = GatewayLogs()  # options.gateway calls: env.AI.gateway(id).getLog
        self.tally = AITally()  # the operator's metrics (ember serve --metrics-port)
        self.on_call: CallObserver | None = None  # the operator's log (--log-requests)
        self.schema_lane = SchemaLane(compile_worker)  # where schemas are compiled

    async def start(self) -> None:
        """Start the configured models now (``ember serve``, or ``pool.start: eager``)."""
        await self.pool.start()

    async def configure(self, config: GatewayConfig) -> None:
        """A project's ``ai`` section changed (``ember dev`` reload): adopt its pool and quotas."""
        if not self.config.project_config:
            return
        if config.pool != self.config.pool:
            await self.pool.configure(config.pool)
        if config.limits != self.config.limits:
            self.quotas.limits = config.limits
        self.config = dataclasses.replace(self.config, pool=config.pool, limits=config.limits)
        if config.pool.settings.start == "eager":
            await self.pool.start()

    def begin_shutdown(self) -> None:
        """Shutdown has begun: serve on, start no replica again (``ModelPool.begin_shutdown``)."""
        self.pool.begin_shutdown()

    def interrupt(self, reason: str) -> int:
        """End every open AI stream with an error event saying ``reason`` (``ModelPool.interrupt``);
        how many it ended."""
        return self.pool.interrupt(reason)

    async def aclose(self) -> None:
        """Cancel batches, drain in-flight requests, stop every replica."""
        await self.batches.aclose()
        await self.pool.aclose()
        await self.schema_lane.aclose()

    # -- requests ---------------------------------------------------------------------------------

    async def run(
        self,
        tenant: Tenant,
        model: str,
        inputs: Mapping[str, Any],
        options: RunOptions,
        dialect: Dialect = "workers",
        note: Callable[[str], None] | None = None,
        responses: bool = False,
    ) -> AIAnswer:
        """One ``env.AI.run`` / REST ``ai/run`` call; raises AIRequestFailed. ``note``: where
        this request's notes go (a worker's invocation log on ``ember serve``) in place of
        ``progress`` (the dev console, the operator's log); ``responses``: ``inputs`` is the
        chat body of a Responses request (its notes name the Responses fields)."""
        gateway = options.gateway
        log = None
        if gateway is not None and isinstance(inputs, Mapping):
            log = self.logs.start(gateway.id, model, inputs, gateway.metadata)
        started = time.monotonic()
        try:
            say = note or self._progress
            answer = await self._run(tenant, model, inputs, options, dialect, say, responses)
        except Exception as exc:
            failure = self._failure(exc, model)
            if not getattr(exc, "counted", False):
                self._tally(model, failure.status, failure.code.code, started)
                self._observe(tenant, model, failure.status, failure.code.code, started)
            if log is not None and gateway is not None:
                failure = self.logs.failed(tenant.data, log, failure, keep=gateway.collect_log)
            failed = AIRequestFailed(failure)
            failed.counted = True  # the front's ``refusal`` must not count it again
            raise failed from None
        self._tally(model, answer.status, 0, started)
        if self.on_call is not None:
            when_done(answer, started, self._answered(tenant, model, answer))
        if log is None or gateway is None:
            return answer
        return self.logs.answered(tenant.data, log, answer, keep=gateway.collect_log)

    async def chat(
        self, tenant: Tenant, body: Mapping[str, Any], options: RunOptions, responses: bool = False
    ) -> AIAnswer:
        """One OpenAI-compatible ``/chat/completions`` call (``model`` in the body);
        ``responses``: the chat body of a ``/responses`` call (``run``)."""
        model = body.get("model") if isinstance(body, Mapping) else None
        if not isinstance(model, str) or not model:
            failure = failure_of(
                InvalidModelInput("/model", "Invalid value at '/model': expected the model's id"),
                "",
            )
            raise AIRequestFailed(failure)
        answer = await self.run(tenant, model, body, options, "openai", responses=responses)
        return with_ignored_fields(answer, body)

    def require_model(self, model: str, request: bool = True, tenant: Tenant | None = None) -> None:
        """AIRequestFailed (5007) unless ``model`` is served here. Called by every front before
        it reads the request's ``options``: Workers AI looks the model up first, so an unknown
        model is a 5007 whatever else is wrong with the request. ``request``: the check is an
        AI request's (counted in the metrics once, and logged for ``tenant``; False for a
        catalog lookup)."""
        if not isinstance(model, str) or not self.pool.knows(model):
            served = self.pool.model_ids()
            known = isinstance(model, str) and model in self.pool.catalog
            failed = AIRequestFailed(
                no_such_model(str(model), served, self.config.project_config, known)
            )
            if request:
                status, code = failed.failure.status, failed.failure.code.code
                self._tally(UNKNOWN_MODEL, status, code, None)
                if tenant is not None:
                    self._observe(tenant, str(model), status, code, None)
                failed.counted = True
            raise failed

    def schema(self, model: str) -> Schema:
        """The Workers AI schema ``model`` answers ``env.AI.run`` and ``ai/run`` in."""
        return schema_of(model, self.config.pool.serving(model).schema)

    async def _run(
        self,
        tenant: Tenant,
        model: str,
        inputs: Mapping[str, Any],
        options: RunOptions,
        dialect: Dialect,
        say: Callable[[str], None],
        responses: bool = False,
    ) -> AIAnswer:
        self.require_model(model, tenant=tenant)
        options_note = unknown_options_note(model, options.unknown)
        if options_note is not None:
            say(options_note)
        request_id = secrets.token_hex(16)
        if options.queue_request or "request_id" not in inputs:  # a poll runs nothing
            self.neurons.admit(tenant.data, tenant.daily_neurons)
        if options.queue_request or "request_id" in inputs:
            return await self._batch(tenant, model, inputs, options, request_id)
        if "requests" in inputs:
            # Without the option the batch would be read as one chat input and refused for
            # lacking 'messages', which sends the user looking in the wrong place.
            raise InvalidModelInput(
                "/requests",
                "Invalid value at '/requests': an async batch is sent with options.queueRequest "
                "set to true (the third argument of env.AI.run; over REST, ?queueRequest=true)",
            )
        if dialect == "workers" and "input" in inputs and self.schema(model) == "responses":
            call = await self.schema_lane.parsed(
                tenant.data,
                inputs,
                ResponsesCall,
                {**inputs, "model": model},
                self.responses,
                tenant.data,
                model,
                admit=functools.partial(self.quotas.check, tenant.quota),
            )
            # The chat call runs inside this one (``_run``, not ``run``): one gateway log and
            # one failure mapping for the caller's one call.
            return await responses_answer(
                call, lambda body: self._run(tenant, model, body, options, "openai", say, True)
            )
        typo = misspelt_prompt(inputs) if dialect == "workers" else None
        if typo is not None:
            raise InvalidModelInput(
                "/",
                "Invalid value at '/': expected exactly one of 'messages' or 'prompt', got "
                f"neither ({typo})",
            )
        stream = is_streaming(inputs)
        classic_id = self.schema(model) == "classic"
        classic = dialect == "workers" and classic_id
        if classic:
            inputs, dropped = check_classic(model, inputs)
            if dropped is not None:
                say(dropped)
            inputs = classic_inputs(inputs)
        catalog = self.pool.catalog
        entry = catalog.get(model) if model in catalog else None
        if entry is not None and entry.thinking_mandatory:
            inputs, mandatory = mandatory_effort(model, inputs)
            if mandatory:
                say(mandatory)
        vision = entry is not None and entry.vision
        upstream = await self.schema_lane.parsed(
            tenant.data,
            inputs,
            functools.partial(
                upstream_request,
                model,
                inputs,
                dialect,
                stream=stream,
                platform_vision=vision,
                defaults=platform_sampling_defaults(classic=classic_id),
                **classic_limits(classic),
            ),
            # Over its quota, refused before its schemas compile, not after (review38); a
            # request is admitted (counted) later, past the response cache, as any is.
            admit=functools.partial(self.quotas.check, tenant.quota),
        )
        for note in input_notes(model, inputs, dialect):
            say(note)
        gateway = options.gateway
        key = None
        if gateway is not None and gateway.cache_ttl and not gateway.skip_cache:
            scope = f"{dialect}:{'classic:' if classic else ''}{gateway.id}"
            key = cache_key(tenant.data, scope, model, inputs, gateway.cache_key)
            hit = self.cache.get(key)
            if hit is not None:
                return cached_answer(request_id, hit.stream, hit.content)
        release = self.quotas.acquire(tenant.quota)
        try:
            request = options.for_pool(
                request_id,
                fairness_of(tenant.data, tenant.running_share),
                self.cache_salt(tenant.data),
            )
            if not stream:
                try:
                    answer = await self.pool.post(model, upstream.path, upstream.body, request)
                finally:
                    release()
                if answer.status != 200:
                    raise upstream_refusal(model, answer.status, answer.body)
                self.neurons.spend_answer(tenant.data, model, answer.body)
                result = as_chat_completion(answer.body) if upstream.raw else answer.body
                if upstream.named_tool:
                    result = named_tool_result(result)
                note = reasoning_cut_short(model, result, inputs, responses)
                if note is not None:
                    say(note)
                if dialect == "workers" and wants_json(inputs):
                    miss = json_mode_miss(result, inputs)
                    if miss is not None:
                        description = json_mode_failure_description(miss)
                        raise AIRequestFailed(Failure(JSON_MODE_NOT_MET, description))
                shaped = (
                    classic_result(result, wants_json(inputs))
                    if classic
                    else completion_result(result, model, keep_matched_stop=dialect == "openai")
                )
                content = json.dumps(shaped).encode("utf-8")
                if key is not None and gateway is not None and gateway.cache_ttl:
                    self.cache.put(key, False, content, gateway.cache_ttl)
                return AIAnswer(request_id, 200, answer_headers(request_id, False, key), content)
            meter = self.neurons.meter(tenant.data, model, upstream.body)
            events = await self.pool.stream(model, upstream.path, upstream.body, request)
        except BaseException:
            release()
            raise
        ttl = gateway.cache_ttl if gateway is not None else None
        json_inputs = inputs if wants_json(inputs) else None
        store = None
        if key is not None and ttl:
            store = functools.partial(self.cache.put, key, True, ttl=ttl)

        def note() -> None:
            say(cut_short_note(model, inputs, responses))

        chunks = AnswerStream(
            translate(
                events,
                model,
                dialect,
                release,
                store,
                json_inputs,
                upstream.raw,
                note,
                classic,
                named_tool=upstream.named_tool,
                meter=meter,
            ),
            events,
            release,
        )
        return AIAnswer(request_id, 200, answer_headers(request_id, True, key), stream=chunks)

    def cache_salt(self, scope: str) -> str | None:
        """The ``cache_salt`` of the tenant whose data scope is ``scope`` (``cache_salt.py``)."""
        return tenant_salt(self.config.cache_salt_key, scope)

    def models(self) -> list[dict[str, Any]]:
        """The model list, as ``env.AI.models()`` and ``/ai/v1/models`` report it."""
        return model_rows(self.pool)


def shared_gateway(host: Any, config: GatewayConfig | None = None) -> AIGateway:
    """The supervisor's one gateway (``ServiceHost.shared``), made with ``config`` if new."""
    worker = not in_process_wanted()
    return host.shared(  # type: ignore[no-any-return]
        GATEWAY_KEY, lambda: AIGateway(config, compile_worker=worker)
    )
