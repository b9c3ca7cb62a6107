"""OpenAI's Responses API on the model server: ``POST /v1/responses`` and
``GET`` / ``DELETE /v1/responses/{id}``.

A Responses request becomes a chat request (``ResponsesCall``) and runs through the very chat
path ``/v1/chat/completions`` serves (validation, template, constrained decoding, tool and
reasoning parsing, disconnect handling); its answer or chunks become the response object or its
events. Finished responses are kept in the server's bounded ``ResponseStore``.
"""

from __future__ import annotations

from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ember.models.api.responses_call import ResponsesCall
from ember.models.api.responses_store import ResponseNotFound, check_retrieve, deleted
from ember.models.api.schema_fields import carries_schemas
from ember.models.server.inputs import chat_input_taken_in, new_request_id
from ember.models.server.openai_routes import chat_answer, chat_chunks
from ember.models.server.prompt_intake import taken_in
from ember.models.server.state import ServerState
from ember.models.server.wire import (
    ClientGone,
    HTTPError,
    read_json_sized,
    sse_response,
    unless_disconnected,
)

SCOPE = "server"  # one tenant: whoever holds the server's API key


def _state(request: Request) -> ServerState:
    return request.app.state.ember


async def create_response(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    request_id = new_request_id("chatcmpl-")
    served.engine.expect(request_id)  # as in chat_completions
    ticket = None
    try:
        body, size = await read_json_sized(request)
        # Parsing compiles the tools' and text.format's schemas, and the input GLM's tool
        # values (constraint_for): off the loop for a large body or one that carries schemas,
        # as on chat (review35). The store it reads takes a lock for that.
        schemas = carries_schemas(body)
        try:
            call = await taken_in(
                served,
                request_id,
                size,
                schemas=schemas,
                work=lambda: ResponsesCall(body, state.responses, SCOPE, served.name),
            )
        except ResponseNotFound as missing:
            raise _not_found(missing) from None  # raised: the engine forgets the request
        call.show_defaults(served.sampling_defaults.as_dict())
        chat = call.chat
        state.check_model(served, chat.model)
        ticket = served.answer_ids.open(request_id, None, chat.n)  # abort_all finds it
        chat_in = await chat_input_taken_in(served, chat, request_id, size, schemas)
        chat_in.generation = replace(chat_in.generation, ticket=ticket)
    except BaseException:
        served.engine.forget(request_id)
        if ticket is not None:
            ticket.close()
        raise
    if call.stream:
        return sse_response(call.events(chat_chunks(state, served, chat, chat_in)))
    try:
        answer = await unless_disconnected(request, chat_answer(state, served, chat, chat_in))
    except ClientGone:
        return Response(status_code=499)
    return JSONResponse(call.whole(answer))


async def get_response(request: Request) -> Response:
    """``GET`` a stored response, or ``DELETE`` it."""
    state = _state(request)
    response_id = request.path_params["response_id"]
    try:
        if request.method == "DELETE":
            state.responses.delete(SCOPE, response_id)
            return JSONResponse(deleted(response_id))
        check_retrieve(request.query_params)
        stored = state.responses.get(SCOPE, response_id)
    except ResponseNotFound as missing:
        raise _not_found(missing) from None
    return JSONResponse(stored.response)


def _not_found(missing: ResponseNotFound) -> HTTPError:
    return HTTPError(404, str(missing), param=missing.param, code=missing.code)
