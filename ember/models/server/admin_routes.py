"""The operational endpoints routers and clients call beside generation.

    POST /abort_request  SGLang's: ``{"rid": ...}`` or ``{"abort_all": true}``; 200, no body
    GET  /get_load       SGLang's: one entry per data-parallel rank (ember has one)
    GET  /load           vLLM's: ``{"server_load": N}``
    GET  /version        vLLM's: ``{"version": ...}`` (ember's version)

``/abort_request`` ends a request whose ``/generate`` (or OpenAI request) carries that id the way
a client that disconnects ends it: ``AsyncEngine.abort``, applied between engine steps, its pages
freed at once. The request's own answer then finishes as SGLang finishes an aborted one
(``finish_reason`` ``{"type": "abort", "message": "Aborted", ...}``, then ``[DONE]`` when
streaming). The id of a request of ``n`` choices ends every choice, as SGLang's matches every
child of a parent rid (``choices.py``); a choice's own id (``<id>-<i>``) ends that choice. The
id an OpenAI answer carries finds its request too: a body ``rid`` is the engine's id, and
``chatcmpl-<x-request-id>`` (and ``chatcmpl-<x-request-id>-<i>`` for choice ``i``) is looked up
(``answer_ids.py``). A request is found from the moment its body is parsed, before its prompt
is tokenized: an abort that comes before it reached the engine ends it there, without running.
An unknown id is a quiet 200, as SGLang ignores ids it is not serving.

``/get_load`` is what sglang-router's load-aware policies read: ``num_reqs`` (running and
waiting), ``num_waiting_reqs``, ``num_tokens`` (KV tokens held by requests plus the waiting
requests' tokens, as SGLang's scheduler counts them) and ``num_pending_tokens`` (the waiting
part). The numbers are the engine's own, as of its last step.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

import ember
from ember.models.api.fields import optional_bool, optional_str, require_object
from ember.models.server.state import ServerState
from ember.models.server.wire import read_json


def _state(request: Request) -> ServerState:
    return request.app.state.ember


async def abort_request(request: Request) -> Response:
    served = _state(request).ready()
    body = require_object(await read_json(request), "/")
    rid = optional_str(body, "rid", "")
    # A request not in the engine yet (being taken in, waiting for its grammar or its id) is
    # marked in answer_ids: it ends before it would go in.
    if optional_bool(body, "abort_all", "", False):
        served.answer_ids.abort_all()
        served.grammars.abort_all()
        served.engine.abort_all()
    elif rid:
        # The id the engine knows it by (SGLang's rid) or the id its answer carries.
        for request_id in dict.fromkeys([rid, *served.answer_ids.abort(rid)]):
            served.grammars.abort(request_id)
            served.engine.abort(request_id)
    return Response(status_code=200)


def load_entries(state: ServerState) -> list[dict]:
    """SGLang's ``/get_load`` answer (``GetLoadReqOutput`` per rank)."""
    served = state.ready()
    stats = served.llm.stats
    held = stats.pages_used * served.kv.page_size
    return [
        {
            "dp_rank": 0,
            "num_reqs": stats.running + stats.waiting,
            "num_waiting_reqs": stats.waiting,
            "num_tokens": held + stats.waiting_tokens,
            "num_pending_tokens": stats.waiting_tokens,
            "ts_tic": time.perf_counter(),
        }
    ]


async def get_load(request: Request) -> Response:
    return JSONResponse(load_entries(_state(request)))


async def load(request: Request) -> Response:
    """vLLM's ``/load``: the requests the server is working on (vLLM counts those in its
    generation routes; here, the engine's running and waiting ones)."""
    stats = _state(request).ready().llm.stats
    return JSONResponse({"server_load": stats.running + stats.waiting})


async def version(request: Request) -> Response:
    return JSONResponse({"version": ember.__version__})
