"""Between what callers send and what replicas speak.

Callers speak two dialects: Workers AI (``env.AI.run`` and the REST ``ai/run`` endpoint: family-B
inputs, ``messages`` or ``prompt``; streams end with a ``{"response": "", "usage": ...}`` event)
and OpenAI (``/ai/v1/chat/completions``: ``model`` and ``messages``; streams end with an optional
usage chunk). Replicas speak OpenAI only. Inputs are validated here first (``parse_chat_request``,
so an invalid field is a 5006 naming it before any replica is involved), then forwarded with the
fields every backend understands; a stream is translated event by event, passing the replica's
bytes through untouched wherever the dialects agree. A Workers AI model of the classic schema
(``model_schema.py``) is translated once more, by ``classic.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from ember.bindings.ai.failures import lora_refusal
from ember.bindings.ai.fields import SAMPLING_FIELDS, platform_sampling_defaults
from ember.bindings.ai.json_mode import json_mode_cut_short, json_mode_failure_description
from ember.bindings.ai.openai_extras import openai_extras
from ember.bindings.ai.raw_prompt import COMPLETIONS_PATH, raw_body, wants_raw
from ember.models.api.chat_request import (
    WORKERS_AI_MAX_TEMPERATURE,
    ChatRequest,
    Dialect,
    parse_chat_request,
)
from ember.models.api.errors import JSON_MODE_NOT_MET, InvalidRequestField, WorkersAIErrorCode
from ember.models.api.messages import TEXT_ONLY
from ember.models.api.sse import SSE_DONE, sse_data
from ember.models.constrain.automata import Automata
from ember.models.pool.errors import InvalidEvent

CHAT_PATH = "/v1/chat/completions"
THINKING_KW = {"enable_thinking": False}  # what turns GLM's and Kimi's thinking off
# Chat-completions fields both ember's model server and SGLang accept; the rest stay behind.
FORWARDED = (
    "messages",
    "max_tokens",
    "max_completion_tokens",
    *SAMPLING_FIELDS,
    "logprobs",
    "top_logprobs",
    "n",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "chat_template_kwargs",
    "reasoning_effort",
    "stream_options",
)


@dataclass(frozen=True, slots=True)
class Upstream:
    """What to send a replica for one request: the path, the body, whether the prompt is raw
    (a ``/v1/completions`` answer, turned back into the chat shape on the way out), and whether
    it names the function to call (its answer finishes with ``stop``: ``named_tool.py``)."""

    path: str
    body: dict[str, Any]
    raw: bool = False
    named_tool: bool = False


def upstream_request(
    model: str,
    inputs: Mapping[str, Any],
    dialect: Dialect,
    *,
    stream: bool,
    platform_vision: bool = False,
    max_temperature: float = WORKERS_AI_MAX_TEMPERATURE,
    defaults: Mapping[str, Any] | None = None,
    automata: Automata | None = None,
) -> Upstream:
    """Validate ``inputs`` (InvalidRequestField names the field) and build the replica's request.
    ``platform_vision``: the platform model reads images, so a refused image part says that
    it is ember's checkpoint, not the model, that reads text only. ``max_temperature``: the
    model's schema's (a classic model's goes to 5). ``defaults``: the platform's sampling
    defaults for the id (``platform_sampling_defaults``, family B's when None), sent for the
    fields ``inputs`` leaves out so that no replica substitutes its checkpoint's.
    ``automata``: the schemas' budget (None: the request's own; ~1 CPU-s: see SchemaLane)."""
    if isinstance(inputs, Mapping) and inputs.get("lora") is not None:
        # The platform answers 5005 for a model without LoRA support; ignoring the field would
        # answer from the base model as if the adapter had been applied.
        raise lora_refusal(model, inputs["lora"])
    try:
        request = parse_chat_request(inputs, dialect=dialect, max_temperature=max_temperature,
                                     automata=automata)  # fmt: skip
    except InvalidRequestField as exc:
        if platform_vision and exc.expected == TEXT_ONLY:
            expected = (
                f"'text' (ember's local checkpoint for {model} reads text only; the platform "
                "model accepts images)"
            )
            raise InvalidRequestField(exc.field, expected, exc.found, exc.code) from None
        raise
    if defaults is None:
        defaults = platform_sampling_defaults(classic=False)
    inputs = {**inputs, **{k: v for k, v in defaults.items() if inputs.get(k) is None}}
    if inputs.get("top_p") == 0:
        # ember's "only the most likely token"; SGLang and vLLM refuse top_p 0 (their range is
        # (0, 1]), so a replica of either backend gets the same choice said as top_k 1.
        inputs = {**inputs, "top_p": 1.0, "top_k": 1}
    if dialect == "workers" and wants_raw(inputs):
        return Upstream(COMPLETIONS_PATH, raw_body(model, inputs, stream=stream), raw=True)
    body = _chat_body(model, inputs, request, dialect, stream=stream)
    return Upstream(CHAT_PATH, body, named_tool=request.tool_choice.named)


def _chat_body(
    model: str, inputs: Mapping[str, Any], request: ChatRequest, dialect: Dialect, *, stream: bool
) -> dict[str, Any]:
    """The replica's ``/v1/chat/completions`` body for validated ``inputs``."""
    body: dict[str, Any] = {key: inputs[key] for key in FORWARDED if inputs.get(key) is not None}
    if dialect == "openai":
        body.update(openai_extras(inputs, request))
    if request.from_prompt:
        body["messages"] = [{"role": "user", "content": inputs["prompt"]}]
    if not request.enable_thinking:
        # Said another way (``reasoning_effort: "none"``): spelled out for the replica, since
        # SGLang hands reasoning_effort to the template, which GLM's and Kimi's do not read.
        body["chat_template_kwargs"] = {**body.get("chat_template_kwargs", {}), **THINKING_KW}
    body["model"] = model
    body["stream"] = stream
    if stream and dialect == "workers":
        # The platform's stream always ends with usage; ask the replica for it.
        body["stream_options"] = {"include_usage": True}
    return body


def is_streaming(inputs: Mapping[str, Any]) -> bool:
    return inputs.get("stream") is True


def workers_error_event(code: WorkersAIErrorCode, description: str) -> bytes:
    """The last events of a Workers stream that failed midway."""
    return sse_data({"errors": [{"code": code.code, "message": description}]}) + SSE_DONE


def openai_error_event(code: WorkersAIErrorCode, description: str) -> bytes:
    """The last events of an OpenAI stream that failed midway."""
    kind = "server_error" if code.status >= 500 else "invalid_request_error"
    error = {"message": description, "type": kind, "param": None, "code": code.code}
    return sse_data({"error": error}) + SSE_DONE


# A non-empty ``content`` / ``reasoning_content`` in a chunk, read without parsing it (the key
# is preceded by a quote, so ``"reasoning_content"`` never matches the first).
_CONTENT = re.compile(r'"content": ?"[^"]')
_REASONING = re.compile(r'"reasoning_content": ?"[^"]')


def _cut_short(data: str) -> bool:
    return '"finish_reason":"length"' in data or '"finish_reason": "length"' in data


_NULL_USAGE = '"usage":null'
# SGLang's, on a finish chunk: dropped for Workers AI's dialect (_drop_matched_stop), kept for
# OpenAI's, whose callers are vLLM's and SGLang's clients too.
_MATCHED_STOP = '"matched_stop"'


def _event(data: str) -> bytes:
    return b"data: " + data.encode("utf-8") + b"\n\n"


def _renamed(payload: dict[str, Any], model: str) -> bool:
    if payload.get("model", model) != model:
        payload["model"] = model
        return True
    return False


class StreamTranslator:
    """One replica stream -> the caller's dialect, event by event.

    Workers: the same chunks, then the usage chunk as the platform's final ``{"response": "",
    "usage": ...}`` event, then ``[DONE]``; a replica's error event becomes ``{"errors": [{"code",
    "message"}]}``. OpenAI: the chunks as they are (``hide_usage``: less the usage only ember
    asked for, to count neurons). Chunks that need no change pass through unparsed.

    JSON Mode (``json_inputs``, the request's inputs, set): the platform does not stream it
    and raises "JSON Mode couldn't be met" when the JSON cannot be completed. ember streams it;
    a stream that ends with finish_reason "length" has sent incomplete JSON, so its last
    events are that same error (5006) and ``[DONE]``, in place of the usage event, as for any
    stream that fails midway. OpenAI's dialect keeps OpenAI's behaviour (finish_reason only).
    """

    def __init__(
        self,
        dialect: Dialect,
        model: str,
        rename: bool,
        json_inputs: Mapping[str, Any] | None = None,
        hide_usage: bool = False,
    ) -> None:
        self.workers = dialect == "workers"
        self.hide_usage = hide_usage and not self.workers  # OpenAI's: usage we asked for
        self.model = model
        self.rename = rename  # the replica calls the model by another name
        self.json_inputs = json_inputs if self.workers else None
        self.done = False
        # What the stream carried so far: for the JSON Mode hint (still thinking, or JSON) and
        # the dev console's note when thinking ate the whole budget (``thinking_ate_answer``).
        self.saw_content = False
        self.saw_reasoning = False
        self.cut_short = False  # a finish_reason "length" came

    @property
    def thinking_ate_answer(self) -> bool:
        """The budget ran out inside the reasoning: no content was streamed at all."""
        return self.cut_short and self.saw_reasoning and not self.saw_content

    def feed(self, data: str) -> bytes:
        """The bytes for one replica event (maybe none); ``done`` once the stream ended."""
        if self.done:
            return b""
        out = self._feed(data)
        self.saw_content = self.saw_content or _CONTENT.search(data) is not None
        self.saw_reasoning = self.saw_reasoning or _REASONING.search(data) is not None
        cut = _cut_short(data)
        self.cut_short = self.cut_short or cut
        if cut and self.json_inputs is not None and not self.done:
            self.done = True
            reason = json_mode_cut_short(
                self.json_inputs,
                thinking=self.saw_reasoning and not self.saw_content,
                started=self.saw_content,
                thought=self.saw_reasoning,
            )
            out += workers_error_event(JSON_MODE_NOT_MET, json_mode_failure_description(reason))
        return out

    def _feed(self, data: str) -> bytes:
        if self.done:
            return b""
        if data == "[DONE]":
            self.done = True
            return SSE_DONE
        if (self.workers or self.hide_usage) and _NULL_USAGE in data:
            # Workers AI's chunks carry a usage object or none: the replica's "usage":null
            # (include_usage, as OpenAI writes it) made langchain-cloudflare call None.items().
            # Safe on the text: inside a JSON string the quotes would be escaped.
            data = data.replace("," + _NULL_USAGE, "").replace(_NULL_USAGE + ",", "")
        # Workers: a usage object to turn into the final event, or a null usage to drop that
        # the replacements above could not take out (spaced JSON, a lone key): parse those.
        markers = ('"usage":{', '"usage": {', '"usage": null', _NULL_USAGE)
        special = (
            data.startswith('{"error"')
            or (self.workers and _MATCHED_STOP in data)
            or ((self.workers or self.hide_usage) and any(marker in data for marker in markers))
        )
        if not special and not self.rename:
            return _event(data)
        try:
            payload = json.loads(data)
        except ValueError:
            raise InvalidEvent(data) from None  # the stream ends with the error event
        if "error" in payload and self.workers:
            self.done = True
            error = payload["error"] if isinstance(payload["error"], dict) else {}
            message = str(error.get("message") or payload["error"])
            code = error.get("code") if isinstance(error.get("code"), int) else 3040
            return sse_data({"errors": [{"code": code, "message": message}]}) + SSE_DONE
        stripped = self.workers and _drop_matched_stop(payload)
        usage = payload.get("usage")
        if self.hide_usage and "usage" in payload:
            if not payload.get("choices"):
                return b""  # the usage chunk the caller did not ask for
            del payload["usage"]
            stripped = True
        if self.workers and not payload.get("choices") and isinstance(usage, dict):
            return sse_data({"response": "", "usage": usage})
        if self.workers and "usage" in payload and usage is None:
            del payload["usage"]
            _renamed(payload, self.model)
            return sse_data(payload)
        renamed = _renamed(payload, self.model)
        return sse_data(payload) if renamed or stripped else _event(data)

    def end(self) -> bytes:
        """What closes a stream the replica ended without ``[DONE]``."""
        if self.done:
            return b""
        self.done = True
        return SSE_DONE


async def translate(
    events: AsyncIterator[str], dialect: Dialect, model: str, rename: bool = True
) -> AsyncIterator[bytes]:
    """``StreamTranslator`` over an iterator of events (one output chunk per event)."""
    translator = StreamTranslator(dialect, model, rename)
    async for data in events:
        out = translator.feed(data)
        if out:
            yield out
        if translator.done:
            return
    yield translator.end()


def reference_translation(
    events: list[str],
    dialect: Dialect,
    model: str,
    json_inputs: Mapping[str, Any] | None = None,
    hide_usage: bool = False,
) -> list[object]:
    """The slow reference of ``StreamTranslator``: every event parsed, decided on the payload.

    Returns the payloads the caller should see (``"[DONE]"`` as the string); tests compare the
    fast path's bytes, decoded, with this on random streams.
    """
    out: list[object] = []
    saw_content = saw_reasoning = False
    for data in events:
        if data == "[DONE]":
            out.append("[DONE]")
            return out
        try:
            payload = json.loads(data)
        except ValueError:
            raise InvalidEvent(data) from None
        if "error" in payload and dialect == "workers":
            error = payload["error"] if isinstance(payload["error"], dict) else {}
            code = error.get("code") if isinstance(error.get("code"), int) else 3040
            message = str(error.get("message") or payload["error"])
            return [*out, {"errors": [{"code": code, "message": message}]}, "[DONE]"]
        if dialect == "workers":
            _drop_matched_stop(payload)
        if hide_usage and dialect == "openai" and payload.pop("usage", False) is not False:
            if not payload.get("choices"):
                continue  # the usage chunk only the platform asked for (neurons.py)
        usage = payload.get("usage")
        if dialect == "workers" and not payload.get("choices") and isinstance(usage, dict):
            out.append({"response": "", "usage": usage})
            continue
        if dialect == "workers" and "usage" in payload and usage is None:
            del payload["usage"]
        if payload.get("model", model) != model:
            payload["model"] = model
        out.append(payload)
        choices = payload.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        delta = first.get("delta") if isinstance(first, dict) else None
        if isinstance(delta, dict):
            saw_content = saw_content or bool(delta.get("content"))
            saw_reasoning = saw_reasoning or bool(delta.get("reasoning_content"))
        cut = isinstance(first, dict) and first.get("finish_reason") == "length"
        if dialect == "workers" and json_inputs is not None and cut:
            reason = json_mode_cut_short(
                json_inputs,
                thinking=saw_reasoning and not saw_content,
                started=saw_content,
                thought=saw_reasoning,
            )
            message = json_mode_failure_description(reason)
            error = {"code": JSON_MODE_NOT_MET.code, "message": message}
            return [*out, {"errors": [error]}, "[DONE]"]
    return [*out, "[DONE]"]


def workers_stream(events: AsyncIterator[str], model: str) -> AsyncIterator[bytes]:
    """Replica events -> the binding's stream (see ``StreamTranslator``)."""
    return translate(events, "workers", model)


def openai_stream(events: AsyncIterator[str], model: str) -> AsyncIterator[bytes]:
    """Replica events -> an OpenAI stream (see ``StreamTranslator``)."""
    return translate(events, "openai", model)


def completion_result(body: object, model: str, *, keep_matched_stop: bool = False) -> object:
    """A replica's ``chat.completion`` as the caller sees it (``model`` is the caller's id;
    SGLang's ``matched_stop`` only with ``keep_matched_stop``, OpenAI's dialect)."""
    if isinstance(body, dict):
        if "model" in body:
            body["model"] = model
        if not keep_matched_stop:
            _drop_matched_stop(body)
    return body


def _drop_matched_stop(payload: dict[str, Any]) -> bool:
    """Remove SGLang's ``matched_stop`` from the choices (Workers AI has no such field; ember
    models serve keeps it, as SGLang does). True when one was there."""
    dropped = False
    choices = payload.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and "matched_stop" in choice:
            del choice["matched_stop"]
            dropped = True
    return dropped
