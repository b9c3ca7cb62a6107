"""Workers AI error codes and the three ways an error goes out on the wire.

The codes, HTTP statuses and descriptions are the platform's own (Cloudflare docs,
workers-ai/platform/errors.mdx); ``5006`` (schema validation) and ``5035`` (paid-only model) are
observed platform behaviour. The binding raises ``InferenceUpstreamError("<code>: <description>")``;
the REST API answers ``{"success": false, "errors": [{"code", "message"}], ...}``; the
OpenAI-compatible endpoints answer ``{"error": {"message", "type", "param", "code"}}``; a stream
that fails midway sends one last event carrying the error.

This module is torch-free: the AI binding in the supervisor imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.errors import InvalidModelInput


@dataclass(frozen=True)
class WorkersAIErrorCode:
    """One row of the platform's error table. ``description`` may hold ``{model}`` or
    ``{detail}`` placeholders."""

    code: int
    status: int
    name: str
    description: str
    retryable: bool = False

    def message(self, **fields: object) -> str:
        """``"<code>: <description>"``, the text ``InferenceUpstreamError`` carries."""
        return f"{self.code}: {self.describe(**fields)}"

    def describe(self, **fields: object) -> str:
        return self.description.format(**fields) if fields else self.description


NO_SUCH_MODEL = WorkersAIErrorCode(5007, 400, "No such model", "No such model {model} or task")
INVALID_INPUT = WorkersAIErrorCode(5006, 400, "Invalid input", "Error: {detail}")
INVALID_DATA = WorkersAIErrorCode(
    5004, 400, "Invalid data", "Invalid data type for base64 input: {type}"
)
INCOMPLETE_REQUEST = WorkersAIErrorCode(
    3003, 400, "Incomplete request", "Request is missing headers or body: {what}"
)
ACCOUNT_NOT_ALLOWED = WorkersAIErrorCode(
    5018,
    403,
    "Account not allowed for private model",
    "The account is not allowed to access this model",
)
# The platform documents the code and status only; the wording here is ember's.
PAID_ONLY_MODEL = WorkersAIErrorCode(
    5035, 403, "Paid plan required", "This model requires the Workers Paid plan"
)
LORA_UNSUPPORTED = WorkersAIErrorCode(
    5005, 405, "LoRa unsupported", "The model {model} does not support LoRa inference"
)
INVALID_MODEL_ID = WorkersAIErrorCode(3042, 404, "Invalid model ID", "The model name is invalid")
REQUEST_TOO_LARGE = WorkersAIErrorCode(3006, 413, "Request too large", "Request is too large")
TIMEOUT = WorkersAIErrorCode(3007, 408, "Timeout", "Request timeout", retryable=True)
ABORTED = WorkersAIErrorCode(3008, 408, "Aborted", "Request was aborted", retryable=True)
ACCOUNT_LIMITED = WorkersAIErrorCode(
    3036,
    429,
    "Account limited",
    "You have used up your daily free allocation of 10,000 neurons. Please upgrade to "
    "Cloudflare's Workers Paid plan if you would like to continue usage.",
    retryable=True,
)
OUT_OF_CAPACITY = WorkersAIErrorCode(
    3040,
    429,
    "Out of capacity",
    "No more data centers to forward the request to",
    retryable=True,
)
# The same code with the text the platform sends when the caller set ``rejectIfBusy``.
CAPACITY_TEMPORARILY_EXCEEDED = WorkersAIErrorCode(
    3040,
    429,
    "Out of capacity",
    "Capacity temporarily exceeded, please try again.",
    retryable=True,
)
JSON_MODE_NOT_MET = WorkersAIErrorCode(5006, 400, "Invalid input", "JSON Mode couldn't be met")

ALL_CODES = (
    NO_SUCH_MODEL,
    INVALID_INPUT,
    INVALID_DATA,
    INCOMPLETE_REQUEST,
    ACCOUNT_NOT_ALLOWED,
    PAID_ONLY_MODEL,
    LORA_UNSUPPORTED,
    INVALID_MODEL_ID,
    REQUEST_TOO_LARGE,
    TIMEOUT,
    ABORTED,
    ACCOUNT_LIMITED,
    OUT_OF_CAPACITY,
)


class InvalidRequestField(InvalidModelInput):
    """One request field failed validation.

    ``field`` is a JSON pointer into the request body (``/messages/2/content``); ``expected``
    says what would have been accepted and ``found`` what came. ``code`` is OpenAI's error
    code (``invalid_type``, ``invalid_value``, ``missing_required_parameter``,
    ``unsupported_value``).
    """

    def __init__(self, field: str, expected: str, found: str, code: str = "invalid_value"):
        self.expected = expected
        self.found = found
        self.code = code
        where = field or "/"
        super().__init__(field, f"Invalid value at '{where}': expected {expected}, got {found}")


def openai_param(pointer: str) -> str | None:
    """``/messages/2/content`` -> ``messages.[2].content`` (how OpenAI names a param)."""
    if not pointer or pointer == "/":
        return None
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]
    return ".".join(f"[{p}]" if p.isdigit() else p for p in parts)


def openai_error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | int | None = None,
) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def openai_error_for_invalid_input(exc: InvalidModelInput) -> dict:
    """The OpenAI-style 400 body for a validation failure (status 400)."""
    code = getattr(exc, "code", None)
    return openai_error_body(str(exc), param=openai_param(exc.field), code=code)


def workers_message_for_invalid_input(exc: InvalidModelInput) -> str:
    """``"5006: Error: Invalid value at '/messages/2/content': ..."``."""
    return INVALID_INPUT.message(detail=str(exc))


def workers_error_event(code: WorkersAIErrorCode, **fields: object) -> dict:
    """The payload of a mid-stream error event: ``{"errors": [{"code", "message"}]}``."""
    return {"errors": [{"code": code.code, "message": code.describe(**fields)}]}


def rest_error_envelope(code: WorkersAIErrorCode, **fields: object) -> dict:
    """The REST API's failure body (sent with ``code.status``)."""
    return {
        "result": None,
        "success": False,
        "errors": [{"code": code.code, "message": code.describe(**fields)}],
        "messages": [],
    }


def rest_success_envelope(result: object) -> dict:
    return {"result": result, "success": True, "errors": [], "messages": []}
