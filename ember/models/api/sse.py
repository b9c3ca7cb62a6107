"""Server-sent events for the two streaming formats.

OpenAI (``/v1/chat/completions``, ``/v1/completions``)::

    data: {chunk}\\n\\n ... [data: {usage chunk}\\n\\n] data: [DONE]\\n\\n

Workers AI binding, family B (``env.AI.run(..., {stream: true})``), the same chunks, then a
final event with the usage, then ``[DONE]``::

    data: {"response":"","usage":{...,"prompt_tokens_details":{"cached_tokens":N}}}\\n\\n

A stream that fails midway ends with one error event and ``[DONE]``: OpenAI-style
``data: {"error": {...}}`` or Workers-style ``data: {"errors": [{"code", "message"}]}``.
"""

from __future__ import annotations

import json

from ember.models.api.errors import WorkersAIErrorCode, openai_error_body, workers_error_event
from ember.models.api.responses import Usage

SSE_DONE = b"data: [DONE]\n\n"
CONTENT_TYPE = "text/event-stream"


def sse_data(payload: object) -> bytes:
    """One ``data:`` event (compact JSON, UTF-8, no line breaks inside). Strict JSON, as the
    JSON responses are: an infinite or NaN float raises instead of reaching a client's parser
    as ``-Infinity`` (values such as logprobs are clamped before they get here)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return b"data: " + text.encode("utf-8") + b"\n\n"


class OpenAIEvents:
    """Encodes a stream for the OpenAI-compatible endpoints."""

    def chunk(self, chunk: dict) -> bytes:
        return sse_data(chunk)

    def end(self, usage: Usage | None = None) -> bytes:
        # The usage chunk (when asked for) is one of the chunks: see ChatStream.finish.
        return SSE_DONE

    def error(self, code: WorkersAIErrorCode, **fields: object) -> bytes:
        kind = (
            "invalid_request_error" if code.status < 500 and code.status != 429 else "server_error"
        )
        body = openai_error_body(code.describe(**fields), type=kind, code=code.code)
        return sse_data(body) + SSE_DONE


class WorkersEvents:
    """Encodes a stream as the Workers AI binding returns it for family-B models."""

    def chunk(self, chunk: dict) -> bytes:
        return sse_data(chunk)

    def end(self, usage: Usage | None = None) -> bytes:
        if usage is None:
            return SSE_DONE
        return sse_data({"response": "", "usage": usage.to_dict()}) + SSE_DONE

    def error(self, code: WorkersAIErrorCode, **fields: object) -> bytes:
        return sse_data(workers_error_event(code, **fields)) + SSE_DONE


def parse_sse(data: bytes) -> list[object]:
    """Decode a whole event stream back into payloads (``"[DONE]"`` kept as the string);
    for tests and for clients of the pool."""
    events: list[object] = []
    for block in data.decode("utf-8").split("\n\n"):
        lines = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if not lines:
            continue
        text = "\n".join(lines)
        events.append(text if text == "[DONE]" else json.loads(text))
    return events
