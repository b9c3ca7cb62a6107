"""Supervisor side of one deployment's AI binding: check the call, hand it to the gateway.

Wire format (``client.py`` is the only other party; every argument came from an untrusted
isolate and is checked here):

    run     [model, inputs_json | None, options]   (+ upload of inputs_json when large)
            -> {"status", "headers", "body"}                       JSON answer, body inline
            -> StreamReply(head={"status", "headers", "body": None}, chunks)
                                                                   a stream, or a large body
            failure: ServiceError("<code>: <description>", kind="ai", data=Failure.to_data())
            (with returnRawResponse a failure is an answer too, as the platform returns it)
    models  [params | None] -> [{"id", "name", "task", ..., "architecture", "loaded", ...}]
    gateway [gateway_id, "getLog" | "patchLog" | "getUrl", args]
            -> the log (getLog), None (patchLog), the URL (getUrl)
            failure: ServiceError(kind="ai-gateway", data={"status": 404 | 400})

The tenant comes from the spec, never from anything the isolate sends: its quota is the
deployment's; its data (batches, gateway logs, stored responses, cached answers) is the account's
on ``ember serve`` (the ``account`` option the platform adds: the account's REST API sees the same
data) and the project's in ``ember dev``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from ember.bindings.ai.failures import Failure, RequestTooLarge, failure_of
from ember.bindings.ai.gateway import AIAnswer, AIGateway, AIRequestFailed, shared_gateway
from ember.bindings.ai.model_search import ModelSearch, catalog_entry
from ember.bindings.ai.options import parse_run_options
from ember.bindings.ai.rest import LOCAL_ACCOUNT
from ember.bindings.ai.spec import config_of
from ember.bindings.ai.tenant import Tenant
from ember.bindings.base import (
    BindingService,
    BindingSpec,
    CallContext,
    ServiceError,
    ServiceHost,
    StreamReply,
)
from ember.errors import CheckpointError, ConfigError, InvalidModelInput
from ember.models.api.fields import check_body, describe

MAX_INPUT_BYTES = 10 * 2**20  # the platform's batch payload limit; one request stays below
INLINE_BODY_BYTES = 512 * 1024
ACCOUNT_OPTION = "account"  # the platform's: the deployment's account (runtime/platform)
WORKER_OPTION = "worker"  # the platform's: the worker (script) the deployment is a version of
RUNNING_SHARE_OPTION = "ai_running_share"  # the platform's: the account's share of model slots
NEURONS_OPTION = "ai_neurons_per_day"  # the platform's: the account's neurons per UTC day
BODY_CHUNK_BYTES = 64 * 1024


class AIService(BindingService):
    """``env.AI`` of one deployment."""

    def __init__(self, spec: BindingSpec, host: ServiceHost) -> None:
        self.binding = spec.name
        # The platform names the owning account (translate.py); ember dev has none.
        account = spec.options.get(ACCOUNT_OPTION)
        self.account = account if isinstance(account, str) and account else None
        worker = spec.options.get(WORKER_OPTION)
        # The account's part of each model's running slots (translate.py; ember dev: none).
        share = spec.options.get(RUNNING_SHARE_OPTION)
        running_share = float(share) if isinstance(share, int | float) and share else None
        neurons = spec.options.get(NEURONS_OPTION)
        daily = neurons if isinstance(neurons, int) and neurons > 0 else None
        if self.account is None:
            self.tenant = Tenant.alone(host.deployment_id)
        elif isinstance(worker, str) and worker:
            # ai.limits are the worker's: every version of it (a new upload, a gradual
            # rollout's two) counts against one bucket, not a fresh one each.
            self.tenant = Tenant.of_worker(self.account, worker, running_share, daily)
        else:
            self.tenant = Tenant.of_account(self.account, host.deployment_id, running_share, daily)
        self._host = host
        self._config = config_of(spec)
        self._gateway: AIGateway | None = None

    async def gateway(self) -> AIGateway:
        """The supervisor's gateway, serving this deployment's ``ai`` config from now on.

        Made and configured on the first call, not in the constructor: adopting the config
        reads every configured checkpoint's config.json, and a bad one must fail the call that
        needed it (InferenceUpstreamError naming the file, again on each call until fixed)
        rather than the runtime's lookup of this service, where an exception ends the isolate.
        """
        if self._gateway is None:
            gateway = shared_gateway(self._host, self._config)
            await gateway.configure(self._config)
            self._gateway = gateway
        return self._gateway

    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object | StreamReply:
        if method == "models":
            try:
                search = _search(args[0] if isinstance(args, list) and args else None)
                rows = (await self.gateway()).models()
            except (InvalidModelInput, CheckpointError, ConfigError) as exc:
                return _failed(failure_of(exc, ""), raw=False)
            found = [{**catalog_entry(row), **row} for row in rows]
            return found if search is None else search.select(found)
        if method == "gateway":
            return await self._gateway_call(args)
        if method != "run":
            raise ServiceError(f"env.{self.binding} has no method {method!r}", kind="binding")
        if not isinstance(args, list) or len(args) != 3:
            raise ServiceError("run() expects (model, inputs, options)", kind="binding")
        model, inputs_json, raw_options = args
        raw = isinstance(raw_options, dict) and raw_options.get("returnRawResponse") is True
        try:
            if not isinstance(model, str):
                raise InvalidModelInput("model", f"the model id must be a string, got {model!r}")
            gateway = await self.gateway()
            gateway.require_model(model, tenant=self.tenant)  # before inputs and options
            inputs = await _inputs(inputs_json, ctx.upload)
            options = parse_run_options(raw_options, model)
            # The request's notes belong to the worker's author: on ember serve its
            # invocation's log (what `ember tail` shows), on ember dev the dev console and the
            # request's error page, should it fail.
            answer = await gateway.run(self.tenant, model, inputs, options, note=_note_to(ctx))
        except (AIRequestFailed, InvalidModelInput, CheckpointError, ConfigError) as exc:
            if self._gateway is None:  # none to count it in: it could not be made (exc says why)
                return _failed(failure_of(exc, str(model)), raw)
            # Counted and logged once, refused by the gateway or here (inputs, options).
            return _failed(self._gateway.refusal(exc, str(model), self.tenant), raw)
        return _reply(answer)

    async def _gateway_call(self, args: object) -> object:
        """``env.AI.gateway(id)``'s methods over this tenant's gateway logs."""
        if not isinstance(args, list) or len(args) != 3 or not isinstance(args[0], str):
            raise ServiceError("gateway() expects (gateway_id, method, args)", kind="binding")
        gateway_id, op, op_args = args
        op_args = op_args if isinstance(op_args, list) else []
        if op == "getUrl":
            provider = op_args[0] if op_args else None
            return gateway_url(self.account or LOCAL_ACCOUNT, gateway_id, provider)
        if op not in ("getLog", "patchLog") or not op_args:
            raise ServiceError(f"env.{self.binding}.gateway() has no {op!r}", kind="binding")
        logs = (await self.gateway()).logs
        log = logs.get(self.tenant.data, gateway_id, op_args[0])
        if log is None:
            raise ServiceError(
                f"Log {op_args[0]!r} not found in gateway {gateway_id!r} (ember keeps the logs "
                "of calls made with options.gateway.id set to this gateway and collectLog not "
                "false, in memory, until the dev server or platform restarts)",
                kind="ai-gateway",
                data={"status": 404},
            )
        if op == "getLog":
            return log.as_json()
        try:
            logs.patch(log, op_args[1] if len(op_args) > 1 else None)
        except InvalidModelInput as exc:
            raise ServiceError(str(exc), kind="ai-gateway", data={"status": 400}) from None
        return None


def gateway_url(account: str, gateway_id: str, provider: object) -> str:
    """AI Gateway's URL for ``provider`` (the gateway's universal endpoint when None): the
    platform's address, where the same code reaches the gateway once deployed; ember does not
    serve it."""
    base = f"https://gateway.ai.cloudflare.com/v1/{account}/{gateway_id}"
    if provider is None or provider == "universal":
        return base
    return f"{base}/{provider}"


def _note_to(ctx: CallContext) -> Callable[[str], None]:
    return lambda line: ctx.note("warn", line)


def _search(params: object) -> ModelSearch | None:
    """``env.AI.models(params)``: the search API's parameters, as its query would carry them."""
    if params is None:
        return None
    if not isinstance(params, dict):
        raise InvalidModelInput("/", "Invalid value at '/': expected the search parameters")
    query = {
        str(key): str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in params.items()
        if value is not None
    }
    return ModelSearch.parse(query)


async def _inputs(inline: object, upload: AsyncIterator[bytes] | None) -> dict[str, Any]:
    if inline is None:
        if upload is None:
            raise InvalidModelInput("/", "Invalid value at '/': expected an inputs object")
        parts, size = [], 0
        async for chunk in upload:
            size += len(chunk)
            if size > MAX_INPUT_BYTES:
                raise RequestTooLarge("/", f"the inputs exceed {MAX_INPUT_BYTES} bytes")
            parts.append(chunk)
        inline = b"".join(parts)
    if not isinstance(inline, bytes):
        raise InvalidModelInput("/", "Invalid value at '/': expected JSON inputs")
    try:
        value = json.loads(inline)
    except (ValueError, UnicodeDecodeError):
        raise InvalidModelInput("/", "Invalid value at '/': the inputs are not JSON") from None
    except RecursionError:  # the parser recurses per level: it failed the call uncaught
        raise InvalidModelInput(
            "/", "Invalid value at '/': the inputs are nested too deeply"
        ) from None
    if not isinstance(value, dict):
        raise InvalidModelInput(
            "/", f"Invalid value at '/': expected an object, got {describe(value)}"
        )
    check_body(value)  # as the REST route does (rest._json_body)
    return value


def _failed(failure: Failure, raw: bool) -> object:
    if not raw:
        raise ServiceError(failure.message, kind="ai", data=failure.to_data())
    body = {
        "internalCode": failure.code.code,
        "name": failure.code.name,
        "description": failure.description,
        "message": failure.message,
        "errors": [{"code": failure.code.code, "message": failure.description}],
    }
    headers = {"content-type": "application/json", **failure.headers()}
    return {
        "status": failure.status,
        "headers": headers,
        "body": json.dumps(body).encode(),
        "internalCode": failure.code.code,  # env.AI.lastRequestInternalStatusCode
    }


def _reply(answer: AIAnswer) -> object:
    head: dict[str, Any] = {"status": answer.status, "headers": answer.headers, "body": None}
    if answer.stream is not None:
        return StreamReply(head=head, chunks=answer.stream)
    body = answer.body or b""
    if len(body) <= INLINE_BODY_BYTES:
        head["body"] = body
        return head
    return StreamReply(head=head, chunks=_chunks(body))


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(view), BODY_CHUNK_BYTES):
        yield bytes(view[start : start + BODY_CHUNK_BYTES])
