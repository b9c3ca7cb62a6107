"""The gateway's side of queued batches: submit or poll one, and run each of its requests.

``env.AI.run(model, {requests: [...]}, {queueRequest: true})`` (or REST ``?queueRequest=true``)
is validated whole before it is queued, each request named by its place in ``/requests``; a call
with a ``request_id`` polls it. ``BatchQueue`` (``batches.py``) owns the queue and the stored
answers; this runs one queued request through the pool in the account's share, shaped as the
model's schema answers. Apart from ``gateway.py`` because none of it is on the path of a single
request.

``GatewayBatches`` is a mixin of ``AIGateway`` (``BatchQueue`` calls ``_run_batch_item`` on it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ember.bindings.ai.answer import AIAnswer, answer_headers
from ember.bindings.ai.batches import BatchQueue, requests_of
from ember.bindings.ai.classic import classic_inputs, classic_limits, classic_result
from ember.bindings.ai.classic_schema import check_classic
from ember.bindings.ai.dialects import completion_result, upstream_request
from ember.bindings.ai.failures import LoraUnsupported
from ember.bindings.ai.fields import platform_sampling_defaults
from ember.bindings.ai.json_mode import wants_json
from ember.bindings.ai.model_schema import Schema
from ember.bindings.ai.named_tool import named_tool_result
from ember.bindings.ai.neurons import NeuronBook
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.raw_prompt import as_chat_completion
from ember.bindings.ai.schema_lane import SchemaLane
from ember.bindings.ai.tenant import Tenant, fairness_of
from ember.errors import InvalidModelInput
from ember.models.api.responses_call import ResponsesCall
from ember.models.api.responses_store import ResponseStore
from ember.models.constrain.automata import Automata
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.upstream import upstream_refusal

PER_BATCH = (
    "per queued batch (every request's tools and response format together; a schema repeated "
    "across requests counts once)"
)


class GatewayBatches:
    """Queued batches of one ``AIGateway``."""

    # Set by AIGateway.__init__.
    pool: ModelPool
    responses: ResponseStore
    batches: BatchQueue
    schema_lane: SchemaLane
    neurons: NeuronBook

    if TYPE_CHECKING:  # defined by AIGateway

        def schema(self, model: str) -> Schema: ...

        def cache_salt(self, scope: str) -> str | None: ...

    async def _batch(
        self,
        tenant: Tenant,
        model: str,
        inputs: Mapping[str, Any],
        options: RunOptions,
        request_id: str,
    ) -> AIAnswer:
        if "request_id" in inputs and not options.queue_request:
            result = self.batches.poll(tenant.data, model, inputs["request_id"])
        else:
            self._refuse_unqueued(model)
            classic = self.schema(model) == "classic"
            limits = classic_limits(classic)
            # One automaton budget for the whole batch, each distinct schema charged once: a
            # budget per request let 1,000 requests of distinct costly patterns (1.4 MB) cost
            # the supervisor ~400 CPU-s to validate.
            budget = Automata(scope=PER_BATCH)

            def validate(request: Mapping[str, Any], where: str) -> None:
                try:
                    if self._responses_item(model, request, budget) is not None:
                        return  # the Responses form, parsed and checked
                    if classic:
                        request = classic_inputs(check_classic(model, request)[0])
                    upstream_request(
                        model, request, "workers", stream=False, automata=budget, **limits
                    )
                except LoraUnsupported:
                    raise  # 5005 for the whole batch, as for one request
                except InvalidModelInput as exc:
                    # '/prompt' -> '/requests/0/prompt'; '/' (the request itself) -> '/requests/0'
                    if exc.field in ("", "/"):
                        field, message = where, str(exc).replace("'/'", f"'{where}'", 1)
                    else:
                        field, message = where + exc.field, str(exc).replace("'/", f"'{where}/", 1)
                    raise InvalidModelInput(field, message) from None

            requests = requests_of(inputs)
            self.batches.check_room(tenant.data)  # before the compile, not after (review38)

            def validate_all() -> None:
                for index, request in enumerate(requests):
                    validate(request, f"/requests/{index}")

            # Off the event loop, which serves every other request meanwhile.
            await self.schema_lane.run(tenant.data, validate_all)
            result = self.batches.submit(tenant.data, model, inputs, None)
        content = json.dumps(result).encode("utf-8")
        return AIAnswer(request_id, 200, answer_headers(request_id, False, None), content)

    def _refuse_unqueued(self, model: str) -> None:
        """A 5006 for a model whose platform catalog entry has ``async_queue`` false: code that
        queues batches there works here only (kimi-k2.5's file says false, kimi-k2.6's true)."""
        catalog = self.pool.catalog
        entry = catalog.get(model) if model in catalog else None
        if entry is None or entry.async_queue is not False:
            return
        queued = [e.model_id for e in catalog if e.async_queue]
        raise InvalidModelInput(
            "/",
            f"Invalid value at '/': {model} does not take queued batches (options.queueRequest) "
            "on Workers AI, its catalog entry has async_queue false; "
            + (f"{', '.join(queued)} does" if queued else "send its requests one by one"),
        )

    def _responses_item(
        self, model: str, request: Mapping[str, Any], budget: Automata | None = None
    ) -> ResponsesCall | None:
        """A batch item in the Responses form (a gpt-oss id's ``input``), parsed; not stored,
        as the platform's batch answers are fetched by request id, not response id."""
        if not isinstance(request, Mapping) or "input" not in request:
            return None
        if self.schema(model) != "responses":
            return None
        body = {**request, "model": model, "store": False, "stream": False}
        return ResponsesCall(body, self.responses, "", model, budget)

    async def _run_batch_item(
        self, scope: str, model: str, request: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One request of a batch that ``scope`` (an account, on ``ember serve``) queued."""
        # Parsed again, off the loop where it carries schemas: they were compiled when the
        # batch was validated, but the memo of known schemas may have forgotten them since.
        lane = self.schema_lane
        call = await lane.parsed(scope, request, self._responses_item, model, request)
        classic = call is None and self.schema(model) == "classic"
        if call is not None:
            body = call.chat_body()
            upstream = await lane.parsed(
                scope,
                body,
                functools.partial(upstream_request, model, body, "openai", stream=False),
            )
        else:
            if classic:
                request = classic_inputs(check_classic(model, request)[0])
            upstream = await lane.parsed(
                scope,
                request,
                functools.partial(
                    upstream_request,
                    model,
                    {**request, "stream": False},
                    "workers",
                    stream=False,
                    defaults=platform_sampling_defaults(classic=classic),
                    **classic_limits(classic),
                ),
            )
        # Its account's share of the pool, and its account's part of the prefix cache.
        options = RequestOptions(fairness=fairness_of(scope), cache_salt=self.cache_salt(scope))
        self.neurons.check(scope)  # run after its caller left: its account's allowance still
        answer = await self.pool.post(model, upstream.path, upstream.body, options)
        if answer.status != 200:
            raise upstream_refusal(model, answer.status, answer.body)
        self.neurons.spend_answer(scope, model, answer.body)
        if call is not None:
            return call.whole(answer.body)  # type: ignore[arg-type]
        result = as_chat_completion(answer.body) if upstream.raw else answer.body
        if upstream.named_tool:
            result = named_tool_result(result)
        if classic:
            return classic_result(result, wants_json(request))  # type: ignore[return-value]
        return completion_result(result, model)  # type: ignore[return-value]
