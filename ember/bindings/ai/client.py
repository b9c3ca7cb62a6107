"""Isolate side of the AI binding: ``env.AI`` as Python Workers see it.

``await env.AI.run(model, inputs, options=None)`` returns what the platform returns:

- a ``chat.completion`` (a ``JsDict``: ``result["choices"][0]`` and ``result.choices[0]`` both
  work), or the answer of an async batch (``queueRequest``) or of a poll;
- with ``inputs["stream"] = True``, a ``ReadableStream`` of server-sent events that a handler can
  return as is: ``Response(stream, headers={"content-type": "text/event-stream"})``;
- with ``options["returnRawResponse"]``, a ``Response`` (the ``workers`` module's) with the
  status, headers and body as they came, failures included.

``env.AI.gateway(id)`` reads and annotates the logs of calls made with ``options.gateway``
(``client_gateway.py``); ``toMarkdown``, ``autorag`` and ``aiSearch`` say what ember offers
instead. Failures raise ``InferenceUpstreamError("<code>: <description>")``. The client holds
no state beyond the last request's ids and status (as the platform's ``lastRequestId``,
``aiGatewayLogId`` etc.), no secrets, and imports neither torch nor the pool.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

from ember.bindings.ai.client_gateway import AiGateway, unsupported
from ember.bindings.base import BindingChannel, BindingSpec, ServiceError
from ember.bindings.jsdict import JsDict, to_jsdict, to_plain
from ember.bindings.streams import ReadableStream
from ember.errors import BindingError
from ember.js_errors import JsTypeError

# Inputs up to this size travel in the call frame; larger ones are uploaded as a stream.
INLINE_INPUT_BYTES = 256 * 1024
_DROPPED_OPTIONS = ("signal",)  # an AbortSignal cannot cross processes: cancel the task instead
_ABSENT: Any = object()  # an argument the caller did not pass (JavaScript's undefined)


class InferenceUpstreamError(BindingError):
    """Workers AI's error class: ``str(error)`` is ``"<code>: <description>"``.

    ``code`` (e.g. 3040), ``status`` (its HTTP status, e.g. 429), ``name`` and ``description``
    are attributes, so handlers can branch on them (3040 and 3036 are worth retrying).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        status: int | None = None,
        name: str = "InferenceUpstreamError",
        description: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.code = code
        self.status = status
        self.error_name = name
        self.name = name  # JsException's attribute: the JS error's class, as Pyodide gives it
        self.description = description
        self.retry_after = retry_after
        super().__init__(message)


class RawResponse:
    """A minimal stand-in for ``workers.Response``, used only outside an isolate."""

    def __init__(self, body: Any, status: int, headers: Mapping[str, str]) -> None:
        self.body = body
        self.status = status
        self.headers = dict(headers)
        self.ok = 200 <= status < 300

    async def text(self) -> str:
        return (await self._bytes()).decode("utf-8")

    async def json(self) -> Any:
        return to_jsdict(json.loads(await self._bytes()))

    async def _bytes(self) -> bytes:
        if isinstance(self.body, ReadableStream):
            return await self.body.read_all()
        return bytes(self.body or b"")


class Ai:
    """``env.<BINDING>`` for an ``ai`` binding."""

    def __init__(self, spec: BindingSpec, channel: BindingChannel) -> None:
        self._name = spec.name
        self._channel = channel
        self.lastRequestId: str | None = None  # noqa: N815 - the platform's names
        self.lastRequestHttpStatusCode: int | None = None  # noqa: N815
        self.lastRequestInternalStatusCode: int | None = None  # noqa: N815 - Workers AI's code
        self.aiGatewayLogId: str | None = None  # noqa: N815

    def __repr__(self) -> str:
        return f"<Ai {self._name}>"

    @property
    def last_request_id(self) -> str | None:
        return self.lastRequestId

    async def run(
        self, model: Any, inputs: Any = _ABSENT, options: Any = _ABSENT, *more: Any, **kwargs: Any
    ) -> Any:
        """Run ``model`` on ``inputs``; see the module docstring for what comes back.

        Keyword arguments are what Pyodide makes of them when Python calls a JavaScript
        function: one object appended as the last positional argument. So ``run(model,
        messages=[...])`` passes them as the inputs, ``run(model, inputs, gateway={...})`` as the
        options, and after the options they are a fourth argument, which ``run`` ignores.
        """
        inputs, options = _pyodide_arguments(inputs, options, kwargs)
        if not isinstance(model, str):
            raise JsTypeError(f"env.{self._name}.run(): model must be a string id, got {model!r}")
        plain_inputs = to_plain(inputs if inputs is not None else {})
        if not isinstance(plain_inputs, dict):
            raise JsTypeError(
                f"env.{self._name}.run(): inputs must be a dict, got {type(inputs).__name__}"
            )
        plain_options = _options(options)
        try:
            encoded = json.dumps(plain_inputs, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise JsTypeError(
                f"env.{self._name}.run(): inputs must be JSON values ({exc})"
            ) from None
        inline, upload = (encoded, None) if len(encoded) <= INLINE_INPUT_BYTES else (None, encoded)
        try:
            reply = await self._channel.call(
                self._name, "run", [model, inline, plain_options], upload=upload
            )
        except ServiceError as exc:
            if exc.kind != "ai":
                raise
            # Every attribute describes this failed request: none may keep an earlier one's id.
            self.lastRequestId = None
            log_id = exc.data.get("aiGatewayLogId")
            self.aiGatewayLogId = log_id if isinstance(log_id, str) else None
            self.lastRequestHttpStatusCode = _int(exc.data.get("status"))
            self.lastRequestInternalStatusCode = _int(exc.data.get("internalCode"))
            raise InferenceUpstreamError(
                str(exc),
                code=_int(exc.data.get("internalCode")),
                status=_int(exc.data.get("status")),
                name=str(exc.data.get("name") or "InferenceUpstreamError"),
                description=str(exc.data.get("description") or ""),
                retry_after=exc.data.get("retryAfter"),  # type: ignore[arg-type]
            ) from None
        head = reply.value if isinstance(reply.value, dict) else {}
        headers = head.get("headers") or {}
        status = int(head.get("status") or 200)
        self.lastRequestId = headers.get("cf-ai-req-id")
        self.lastRequestHttpStatusCode = status
        self.lastRequestInternalStatusCode = _int(head.get("internalCode"))
        self.aiGatewayLogId = headers.get("cf-aig-log-id")
        body = head.get("body")
        if plain_options.get("returnRawResponse") is True:
            content = ReadableStream(reply.stream) if reply.stream is not None else body
            return _response(content, status, headers)
        if reply.stream is not None:
            stream = ReadableStream(reply.stream)
            if str(headers.get("content-type", "")).startswith("text/event-stream"):
                return stream
            body = await stream.read_all()
        result = to_jsdict(json.loads(body or b"null"))
        if isinstance(result, JsDict) and result.get("object") == "chat.completion":
            return ChatCompletion(result)
        return result

    def gateway(self, gateway_id: Any) -> AiGateway:
        """``env.AI.gateway(id)``: the logs of the calls made through AI Gateway ``id``
        (``getLog``, ``patchLog``) and its platform URL (``getUrl``); see client_gateway.py."""
        if not isinstance(gateway_id, str) or not gateway_id:
            raise JsTypeError(f"env.{self._name}.gateway(): expected the gateway's id, a string")
        return AiGateway(self._name, self._channel, gateway_id)

    def toMarkdown(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - the platform's name
        raise unsupported("toMarkdown")

    def autorag(self, *args: Any, **kwargs: Any) -> Any:
        raise unsupported("autorag")

    def aiSearch(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - the platform's name
        raise unsupported("aiSearch")

    async def models(self, params: Any = None) -> list[Any]:
        """The models this ember serves, as the platform's catalog objects (id, name,
        description, task, properties) plus how ember serves each (architecture, context,
        replicas, loaded). ``params``: the search API's (search, author, task, source,
        hide_experimental, page, per_page)."""
        plain = to_plain(params) if params is not None else None
        if plain is not None and not isinstance(plain, dict):
            raise JsTypeError(
                f"env.{self._name}.models(): params must be a dict, got {type(params).__name__}"
            )
        try:
            reply = await self._channel.call(self._name, "models", [plain])
        except ServiceError as exc:
            if exc.kind != "ai":
                raise
            raise InferenceUpstreamError(
                str(exc),
                code=_int(exc.data.get("internalCode")),
                status=_int(exc.data.get("status")),
                description=str(exc.data.get("description") or ""),
            ) from None
        return to_jsdict(reply.value)  # type: ignore[no-any-return]


# The classic (family A) schema answers ``{"response": ...}``; scripts written for Llama
# models read that key, which a chat.completion does not have.
_WHERE_THE_ANSWER_IS = (
    "'response': this model answers as an OpenAI chat.completion (Workers AI's schema for "
    "Kimi and GLM), not as the classic {response: ...}: the text is "
    "result['choices'][0]['message']['content']"
)


class ChatCompletion(JsDict):
    """A ``chat.completion`` result; reading the classic schema's ``response`` says where the
    answer is instead of a bare ``KeyError: 'response'``."""

    __slots__ = ()

    def __missing__(self, key: str) -> Any:
        raise KeyError(_WHERE_THE_ANSWER_IS if key == "response" else key)

    def __getattr__(self, name: str) -> Any:
        if name == "response":
            raise AttributeError(_WHERE_THE_ANSWER_IS)
        return super().__getattr__(name)


def _pyodide_arguments(inputs: Any, options: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(inputs, options) after Pyodide's keyword-argument rule (see ``Ai.run``); an argument
    not passed is None, as JavaScript's ``undefined`` reaches ``run``."""
    if kwargs:
        if inputs is _ABSENT:
            inputs = kwargs
        elif options is _ABSENT:
            options = kwargs
    return (None if inputs is _ABSENT else inputs), (None if options is _ABSENT else options)


def _options(options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    plain = to_plain(dict(options) if isinstance(options, Mapping) else options)
    if not isinstance(plain, dict):
        raise JsTypeError(f"env.AI.run(): options must be a dict, got {type(options).__name__}")
    for key in _DROPPED_OPTIONS:
        plain.pop(key, None)
    try:
        json.dumps(plain)
    except (TypeError, ValueError) as exc:
        raise JsTypeError(f"env.AI.run(): options must be JSON values ({exc})") from None
    return plain


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _response(body: Any, status: int, headers: Mapping[str, str]) -> Any:
    """A ``workers.Response`` inside an isolate (the handler may return it as is)."""
    try:
        workers = importlib.import_module("workers")
    except ImportError:
        return RawResponse(body, status, headers)
    return workers.Response(body, status=status, headers=dict(headers))
