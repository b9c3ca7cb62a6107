"""The AI binding: ``env.AI.run(model, inputs, options)`` answered by local Kimi and GLM models.

    client.py    isolate side: ``Ai`` (``env.AI``), ``InferenceUpstreamError``; no state, no torch
    service.py   supervisor side, one per deployment: validates calls, hands them to the gateway
    gateway.py   one per supervisor: model pool, response cache, batches, per-tenant quotas
    gateway_batches.py  the gateway's side of batches: submit or poll, run each request
    answer.py    what the gateway answers: ``AIAnswer`` (JSON or stream) or ``AIRequestFailed``
    answer_stream.py  a streamed answer: replica events -> the caller's events, freed on close
    dialects.py  Workers AI and OpenAI requests and streams <-> the replicas' protocol
    json_mode.py JSON Mode: whether an answer met it, and why not in words naming the field
    thinking.py  dev-console notes: thinking that used the budget, thinking fields ignored
    unknown_fields.py  dev-console note: input fields nothing reads (a typo: "did you mean")
    model_rows.py    the model list's rows: the platform's flags and what ember serves
    options.py   ``AiOptions`` (rejectIfBusy, extraHeaders, gateway, queueRequest, ...)
    failures.py  any failure -> Workers AI code, status and description
    quota.py, cache.py, batches.py   per-tenant limits, response cache, async batches
    neurons.py   what an answer costs in neurons; each account's neurons per UTC day
    rest.py      the REST ``ai/run`` and OpenAI-compatible routes (starlette)
    rest_replies.py  answers and failures as HTTP responses: the envelope, OpenAI's errors, events
    fallback_routes.py  other paths and methods under the AI prefixes: 404/405 naming the served
    dev_mount.py     ``rest.py`` on ``ember dev``'s port, adopting the ``ai`` section on reload
    model_search.py  ``ai/models/search`` and ``env.AI.models()``: catalog objects, filters, pages
    raw_prompt.py    ``raw: true``: the prompt sent without the chat template
    fields.py        the request fields forwarded to a replica
    spec.py      the ``ai`` config section and the binding type

``BINDING_TYPE`` is imported lazily: an isolate importing the client must not load the pool.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "BINDING_TYPE":
        from ember.bindings.ai.spec import BINDING_TYPE

        return BINDING_TYPE
    raise AttributeError(name)
