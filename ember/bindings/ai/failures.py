"""Any failure of an AI request -> the Workers AI code, status and description it is sent as.

The binding raises ``InferenceUpstreamError("<code>: <description>")`` from it, the REST API
answers ``{"success": false, "errors": [{"code", "message"}]}`` with its status, and the
OpenAI-compatible API answers ``{"error": {...}}``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ember.errors import CheckpointError, ConfigError, InvalidModelInput, ModelNotFound
from ember.models.api.errors import (
    INCOMPLETE_REQUEST,
    INVALID_INPUT,
    LORA_UNSUPPORTED,
    NO_SUCH_MODEL,
    OUT_OF_CAPACITY,
    REQUEST_TOO_LARGE,
    WorkersAIErrorCode,
    openai_param,
)
from ember.models.api.responses_store import ResponseNotFound
from ember.models.constrain.compile_client import CompileWorkerFailed
from ember.models.pool.errors import (
    MODEL_UNAVAILABLE,
    REPLICA_FAILED,
    CapacityExceeded,
    UpstreamFailed,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed AI request, as every API reports it."""

    code: WorkersAIErrorCode
    description: str
    retry_after: float | None = None
    field: str | None = None  # the invalid input's JSON pointer (5006)
    hint: str = ""  # ember's own advice after the platform's text (an unknown model: 5007)
    log_id: str | None = None  # the AI Gateway log of a call made with options.gateway

    @property
    def message(self) -> str:
        """``"<code>: <description>"``: the text of ``InferenceUpstreamError``."""
        return f"{self.code.code}: {self.description}"

    @property
    def status(self) -> int:
        return self.code.status

    def to_data(self) -> dict[str, object]:
        """What crosses to the isolate (and what the client rebuilds the error from)."""
        return {
            "internalCode": self.code.code,
            "status": self.code.status,
            "name": self.code.name,
            "description": self.description,
            "retryAfter": self.retry_after,
            "aiGatewayLogId": self.log_id,
        }

    def rest_body(self) -> dict[str, object]:
        """The REST API's failure envelope."""
        return {
            "result": None,
            "success": False,
            "errors": [{"code": self.code.code, "message": self.description}],
            "messages": [],
        }

    def openai_body(self) -> dict[str, object]:
        """The OpenAI-compatible API's error body."""
        kind = "invalid_request_error" if self.code.status < 500 else "server_error"
        if self.code.status == 429:
            kind = "rate_limit_error" if self.code.code == 3036 else "server_error"
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": openai_param(self.field) if self.field else None,
                "code": self.code.code,
            }
        }

    def headers(self) -> dict[str, str]:
        headers = {} if self.log_id is None else {"cf-aig-log-id": self.log_id}
        if self.retry_after is not None:
            headers["retry-after"] = str(max(1, round(self.retry_after)))
        return headers


def failure_of(exc: BaseException, model: str) -> Failure:
    """The Failure for an exception raised while serving a request for ``model``."""
    if isinstance(exc, CapacityExceeded):
        return Failure(exc.code, exc.description, exc.retry_after)
    if isinstance(exc, UpstreamFailed):
        return Failure(exc.code, exc.description)
    if isinstance(exc, LoraUnsupported):
        return Failure(LORA_UNSUPPORTED, LORA_UNSUPPORTED.describe(model=model), field=exc.field)
    if isinstance(exc, IncompleteRequest):
        return Failure(INCOMPLETE_REQUEST, INCOMPLETE_REQUEST.describe(what=exc.field))
    if isinstance(exc, RequestTooLarge):
        return Failure(REQUEST_TOO_LARGE, f"{REQUEST_TOO_LARGE.description}: {exc}")
    if isinstance(exc, InvalidModelInput):
        return Failure(INVALID_INPUT, f"Error: {exc}", field=exc.field or "/")
    if isinstance(exc, ResponseNotFound):
        # A caller's unknown previous_response_id (env.AI.run, REST ai/run): its mistake, not
        # the replica's, so not 3040's "please try again".
        return Failure(INVALID_INPUT, f"Error: {exc}", field=f"/{exc.param or 'id'}")
    if isinstance(exc, CompileWorkerFailed):
        # The schema compiler's process died or stayed busy (compile_client.py): load, retry.
        return Failure(OUT_OF_CAPACITY, f"{OUT_OF_CAPACITY.description}: {exc}", 1.0)
    if isinstance(exc, ModelNotFound):
        # "/model": the OpenAI-compatible body's field (its error names it in ``param``).
        return Failure(NO_SUCH_MODEL, NO_SUCH_MODEL.describe(model=model), field="/model")
    if isinstance(exc, CheckpointError | ConfigError):
        return Failure(MODEL_UNAVAILABLE, MODEL_UNAVAILABLE.describe(model=model, detail=str(exc)))
    log.exception("AI request for %s failed", model, exc_info=exc)
    detail = f"internal error ({type(exc).__name__})"
    return Failure(REPLICA_FAILED, REPLICA_FAILED.describe(model=model, detail=detail))


class IncompleteRequest(InvalidModelInput):
    """A request without a body (3003); ``field`` names what is missing."""


class RequestTooLarge(InvalidModelInput):
    """The inputs exceed what one request may carry (3006)."""


class LoraUnsupported(InvalidModelInput):
    """The inputs ask for a LoRA adapter, which no Kimi or GLM model takes (5005, 405)."""


# The ids whose catalog entry has the property ``lora: true`` (the base models Cloudflare
# dedicates to inference with LoRA adapters): the platform applies an adapter on these.
LORA_CAPABLE_IDS = frozenset(
    {
        "@cf/mistral/mistral-7b-instruct-v0.2-lora",
        "@cf/google/gemma-2b-it-lora",
        "@cf/google/gemma-7b-it-lora",
        "@cf/meta-llama/llama-2-7b-chat-hf-lora",
    }
)


def lora_refusal(model: str, adapter: object) -> InvalidModelInput:
    """``lora`` in the inputs: 5005 for an id the platform serves without adapters; for a
    LoRA-capable id the platform would apply the adapter, and ember serves none (5006), where
    answering from the base model would pass the model off as fine-tuned."""
    if model not in LORA_CAPABLE_IDS:
        return LoraUnsupported("/lora", f"{model} does not support LoRa inference")
    return InvalidModelInput(
        "/lora",
        f"Invalid value at '/lora': ember serves no LoRA adapters ({adapter!r} was asked for): "
        f"on the platform {model} applies the fine-tune you uploaded with `wrangler ai "
        "finetune create`; locally, leave 'lora' out to run the base model",
    )
