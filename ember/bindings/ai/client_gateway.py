"""Isolate side of ``env.AI.gateway(id)`` (AI Gateway's binding methods) and of the ``env.AI``
methods ember cannot serve.

    gateway = env.AI.gateway("my-gateway")
    log = await gateway.getLog(env.AI.aiGatewayLogId)    # after run(..., {"gateway": {...}})
    await gateway.patchLog(log_id, {"feedback": 1, "score": 100, "metadata": {...}})
    url = await gateway.getUrl("openai")                 # the platform's gateway URL

``getLog`` / ``patchLog`` read ember's own logs of the calls made with ``options.gateway``
(``gateway_logs.py``); a missing log raises ``AiGatewayLogNotFound``, a refused patch
``AiGatewayInternalError`` (the platform's two classes). ``gateway(id).run`` (the Universal
Endpoint to third-party providers), ``toMarkdown``, ``autorag`` and ``aiSearch`` raise
``AiUnsupported`` saying what ember offers instead.
"""

from __future__ import annotations

from typing import Any

from ember.bindings.base import BindingChannel, ServiceError
from ember.bindings.jsdict import to_jsdict, to_plain
from ember.errors import BindingError


class AiGatewayLogNotFound(BindingError):
    """``getLog`` / ``patchLog`` of a log id this gateway does not hold."""


class AiGatewayInternalError(BindingError):
    """Any other refusal of an AI Gateway method (a malformed patch, say)."""


class AiUnsupported(BindingError):
    """A Workers AI method that only Cloudflare's platform serves; the message says what ember
    offers instead."""


UNSERVED = {
    "toMarkdown": "env.AI.toMarkdown() converts documents with Cloudflare's hosted converters; "
    "ember has no document conversion: convert locally (a Python library such as markitdown or "
    "pypdf) and pass the text to env.AI.run",
    "autorag": "env.AI.autorag() queries an AutoRAG (now AI Search) instance on Cloudflare; "
    "ember serves no AutoRAG index: retrieve passages from your own store (a KV namespace, say) "
    "and pass them with the question to env.AI.run",
    "aiSearch": "env.AI.aiSearch() queries an AI Search instance on Cloudflare; ember serves no "
    "AI Search index: retrieve passages from your own store (a KV namespace, say) and pass them "
    "with the question to env.AI.run",
    "gateway.run": "env.AI.gateway(id).run() sends requests to third-party providers through AI "
    "Gateway's Universal Endpoint; ember reaches no provider: call the models ember serves with "
    "env.AI.run(model, inputs, {'gateway': {'id': ...}}) (cached and logged by ember's gateway)",
}


def unsupported(name: str) -> AiUnsupported:
    return AiUnsupported(UNSERVED[name])


class AiGateway:
    """``env.AI.gateway(gateway_id)``."""

    def __init__(self, binding: str, channel: BindingChannel, gateway_id: str) -> None:
        self._binding = binding
        self._channel = channel
        self.gateway_id = gateway_id

    def __repr__(self) -> str:
        return f"<AiGateway {self.gateway_id}>"

    async def getLog(self, log_id: Any) -> Any:  # noqa: N802 - the platform's names
        """The log of one call made with ``options.gateway.id`` set to this gateway."""
        return to_jsdict(await self._call("getLog", [to_plain(log_id)]))

    async def patchLog(self, log_id: Any, data: Any) -> None:  # noqa: N802
        """Set the log's ``feedback`` (-1, 1), ``score`` (a number) or ``metadata``."""
        await self._call("patchLog", [to_plain(log_id), to_plain(data)])

    async def getUrl(self, provider: Any = None) -> str:  # noqa: N802
        """The platform's URL of this gateway (its universal endpoint without ``provider``):
        ``https://gateway.ai.cloudflare.com/v1/{account}/{gateway}[/{provider}]``, with
        ember's local account id; ember itself does not serve that address."""
        return str(await self._call("getUrl", [to_plain(provider)]))

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        raise unsupported("gateway.run")

    get_log, patch_log, get_url = getLog, patchLog, getUrl

    async def _call(self, op: str, args: list[Any]) -> Any:
        try:
            reply = await self._channel.call(self._binding, "gateway", [self.gateway_id, op, args])
        except ServiceError as exc:
            if exc.kind != "ai-gateway":
                raise
            if exc.data.get("status") == 404:
                raise AiGatewayLogNotFound(str(exc)) from None
            raise AiGatewayInternalError(str(exc)) from None
        return reply.value
