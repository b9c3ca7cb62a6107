"""The Responses API on the runtime's AI routes (``/ai/v1/responses``, and under
``/client/v4/accounts/{account}/ai/v1``): a Responses request becomes a chat request that goes
through ``AIGateway.chat`` like any other (model ids, quotas, ``options``, session affinity,
busy 429s, the response cache), and its answer is translated back (``responses_bridge``), so
every replica that speaks OpenAI chat (ember's model server, SGLang) serves it. Stored
responses are the gateway's, one scope per tenant.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ember.bindings.ai.gateway import AIAnswer, AIGateway
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.responses_bridge import responses_answer
from ember.bindings.ai.tenant import Tenant
from ember.models.api.responses_call import ResponsesCall


async def create_response(
    gateway: AIGateway, tenant: Tenant, body: Mapping[str, Any], options: RunOptions
) -> AIAnswer:
    """One ``POST .../ai/v1/responses``; raises what ``AIGateway.chat`` raises, plus
    ``InvalidRequestField`` and ``ResponseNotFound``."""
    # The route checked the model first (require_model), as the chat route does.
    # Its tools' and text.format's schemas compile off the loop (schema_lane.py), as a chat
    # request's do, and not at all past the tenant's quota (review38).
    model = str(body.get("model") or "")
    admit = functools.partial(gateway.quotas.check, tenant.quota)
    call = await gateway.schema_lane.parsed(
        tenant.data, body, ResponsesCall, body, gateway.responses, tenant.data, model, admit=admit
    )
    return await responses_answer(
        call, lambda chat: gateway.chat(tenant, chat, options, responses=True)
    )
