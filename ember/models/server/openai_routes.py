"""OpenAI-compatible endpoints: ``/v1/chat/completions`` and ``/v1/models`` (``/v1/completions``
is ``completion_routes.py``).

Streaming answers are SSE (``data: {chunk}`` ... ``data: [DONE]``) with the usage chunk when
``stream_options.include_usage`` is set (and, with vLLM's ``continuous_usage_stats``, the counts
so far on every chunk); one engine step's chunks go out as one write. A stream that fails midway
ends with an error event. A request whose client disconnects (or stops reading) is aborted.

Constrained decoding on both: ``response_format`` (JSON), SGLang's ``regex`` and vLLM's
``structured_outputs.regex`` (the text matches in full); chat adds forced tool calls.

``n`` choices (``choices.py``): each has its own parser (content, reasoning, tool calls),
finish and logprobs; streamed chunks carry their choice's ``index``, each choice ends with its
own finish chunk, and the usage chunk comes once, after the last. Usage counts the prompt once
and sums the choices' completion tokens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ember.models.api.chat_request import (
    SERVER_MAX_STOP_STRINGS,
    ChatRequest,
    parse_chat_request,
)
from ember.models.api.deltas import OutputAccumulator
from ember.models.api.read_fields import ignored_note, tracked
from ember.models.api.responses import (
    TokenLogprob,
    chat_choice,
    chat_completion_of,
    now,
)
from ember.models.api.schema_fields import carries_schemas
from ember.models.api.sse import SSE_DONE, sse_data
from ember.models.engine.logprob_types import PromptTokenLogprob
from ember.models.server.caller_id import answer_id
from ember.models.server.chat_chunks import choices_usage, stream_chat
from ember.models.server.choices import choice_inputs, stream_choices
from ember.models.server.generation import GenerationEvent, LogprobRecord
from ember.models.server.inputs import (
    ChatInput,
    chat_input_taken_in,
    logprob_token,
    new_request_id,
    own_request_id,
)
from ember.models.server.loading import ServedModel
from ember.models.server.prompt_intake import taken_in
from ember.models.server.prompt_logprobs import vllm_prompt_logprobs
from ember.models.server.state import ServerState
from ember.models.server.wire import (
    ClientGone,
    model_not_found,
    read_json_sized,
    sse_response,
    unless_disconnected,
)


def _state(request: Request) -> ServerState:
    return request.app.state.ember


def token_logprobs(
    served: ServedModel, records: list[LogprobRecord], *, sampled_in_top: bool = False
) -> list[TokenLogprob]:
    """The generated tokens' logprobs. ``sampled_in_top``: the legacy completions format, whose
    ``top_logprobs`` dict holds the sampled token first and then the most likely ones (up to
    ``logprobs`` + 1 entries: OpenAI's, and vLLM's dict); chat lists only the alternatives."""
    out = []
    for record in records:
        text, raw = logprob_token(served, record.token_id)
        top = [TokenLogprob(text, record.logprob, raw=raw)] if sampled_in_top else []
        for token_id, value in record.top:
            if sampled_in_top and token_id == record.token_id:
                continue  # listed first already
            alt_text, alt_raw = logprob_token(served, token_id)
            top.append(TokenLogprob(alt_text, value, raw=alt_raw))
        out.append(TokenLogprob(text, record.logprob, tuple(top), raw))
    return out


# -- /v1/chat/completions ------------------------------------------------------------------------


async def chat_completions(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    request_id = new_request_id("chatcmpl-")
    # The engine's next step waits for this request while it is read and tokenized, so that
    # requests arriving together start together (AsyncEngine.expect).
    served.engine.expect(request_id)
    ticket = None
    try:
        raw, size = await read_json_sized(request)
        body = tracked(raw)
        # The model server's ranges are vLLM's and SGLang's, not Workers AI's.
        # Parsing compiles the request's schemas: off the loop for a large body (review26) or
        # any that carries schemas (a small one's may take an automaton budget's CPU-s).
        schemas = carries_schemas(raw)
        chat = await taken_in(
            served,
            request_id,
            size,
            schemas=schemas,
            work=lambda: parse_chat_request(
                body,
                dialect="openai",
                max_temperature=None,
                max_repetition_penalty=None,
                max_stop=SERVER_MAX_STOP_STRINGS,
            ),
        )
        note = ignored_note(body)
        if note is not None:
            served.log(f"{request_id}: {note}", "warning")
        state.check_model(served, chat.model)
        request_id = own_request_id(served, request_id, chat.rid, chat.n)
        # SGLang's: the answer carries the rid; else vLLM's chatcmpl-<x-request-id>.
        shown = chat.rid or answer_id("chatcmpl-", request_id)
        # /abort_request finds it from here on, while its prompt is still taken in.
        ticket = served.answer_ids.open(request_id, shown, chat.n)
        # The input's constraint checks GLM's tool values (constraint_for): with the prompt.
        chat_in = await chat_input_taken_in(served, chat, request_id, size, schemas)
        chat_in.response_id = shown
        answer = shown if shown != request_id else None
        chat_in.generation = replace(chat_in.generation, answer_id=answer, ticket=ticket)
    except BaseException:
        served.engine.forget(request_id)
        if ticket is not None:
            ticket.close()
        raise
    if chat.stream:
        return sse_response(_chat_stream(state, served, chat, chat_in))
    try:
        answer = await unless_disconnected(request, chat_answer(state, served, chat, chat_in))
    except ClientGone:
        return Response(status_code=499)
    return JSONResponse(answer)


async def chat_answer(
    state: ServerState, served: ServedModel, chat: ChatRequest, chat_in: ChatInput
) -> dict:
    n = chat.n
    pieces: list[list[str]] = [[] for _ in range(n)]
    records: list[list[LogprobRecord]] = [[] for _ in range(n)]
    last: list[GenerationEvent | None] = [None] * n
    scored: tuple[PromptTokenLogprob, ...] | None = None
    inputs = choice_inputs(chat_in.generation, n)
    async for item in stream_choices(served, state.metrics, inputs):
        index, event = item.index, item.event
        pieces[index].append(event.text)
        records[index].extend(event.logprobs)
        if event.prompt_logprobs is not None:
            scored = event.prompt_logprobs
        thinking = chat_in.readers[index].thinking
        if thinking is not None:
            thinking.feed(event.token_ids)
        last[index] = event
    choices = []
    for index, (reader, event) in enumerate(zip(chat_in.readers, last, strict=True)):
        assert event is not None and event.finish_reason is not None
        total = OutputAccumulator()
        total.add(reader.parser.feed("".join(pieces[index])))
        total.add(reader.parser.finish())
        logprobs = token_logprobs(served, records[index]) if chat.sampling.logprobs else None
        choices.append(
            chat_choice(
                index,
                total.result(),
                event.finish_reason,
                logprobs,
                event.matched_stop,
                event.stop_reason,
                named_tool=chat.tool_choice.named,
            )
        )
    prompt_tokens = len(chat_in.generation.prompt_ids)
    answer = chat_completion_of(
        id=chat_in.response_id or chat_in.generation.request_id,
        created=now(),
        model=served.name,
        choices=choices,
        usage=choices_usage(prompt_tokens, last, chat_in.readers),
    )
    if chat.prompt_logprobs is not None:
        # vLLM's: the rendered prompt's tokens, on the response object (completions put
        # them in the choice).
        assert scored is not None  # the request asked the engine for them
        answer["prompt_logprobs"] = vllm_prompt_logprobs(served, scored, chat.prompt_logprobs)
    return answer


def _sse_batch(batch: list[dict]) -> bytes:
    return b"".join(sse_data(chunk) for chunk in batch)


def _chat_stream(
    state: ServerState, served: ServedModel, chat: ChatRequest, chat_in: ChatInput
) -> AsyncIterator[bytes]:
    return stream_chat(
        served, state.metrics, chat, chat_in, token_logprobs, encode=_sse_batch, tail=SSE_DONE
    )


def chat_chunks(
    state: ServerState, served: ServedModel, chat: ChatRequest, chat_in: ChatInput
) -> AsyncIterator[list[dict]]:
    """The chunks of one streamed answer (every choice), a list per engine step; a failure
    midway is a last ``{"error"}`` payload. ``/v1/responses`` translates the same chunks."""
    return stream_chat(served, state.metrics, chat, chat_in, token_logprobs, encode=list)


# -- /v1/models ----------------------------------------------------------------------------------


def model_card(served: ServedModel) -> dict:
    return {
        "id": served.name,
        "object": "model",
        "created": served.created,
        "owned_by": "ember",
        "root": served.source,
        "max_model_len": served.context_length,
    }


async def list_models(request: Request) -> Response:
    served = _state(request).ready()
    return JSONResponse({"object": "list", "data": [model_card(served)]})


async def get_model(request: Request) -> Response:
    served = _state(request).ready()
    name = request.path_params["model"]
    if name not in served.aliases:
        raise model_not_found(name)
    return JSONResponse(model_card(served))
