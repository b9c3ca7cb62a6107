"""OpenAI-compatible endpoints: ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``.

Streaming answers are SSE (``data: {chunk}`` ... ``data: [DONE]``) with the usage chunk when
``stream_options.include_usage`` is set (and, with vLLM's ``continuous_usage_stats``, the counts
so far on every chunk); one engine step's chunks go out as one write. A stream that fails midway
ends with an error event. A request whose client disconnects (or stops reading) is aborted.

Constrained decoding on both: ``response_format`` (JSON), SGLang's ``regex`` and vLLM's
``structured_outputs.regex`` (the text matches in full); chat adds forced tool calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ember.errors import EmberError
from ember.models.api.chat_request import ChatRequest, parse_chat_request
from ember.models.api.completion_request import CompletionRequest, parse_completion_request
from ember.models.api.deltas import OutputAccumulator
from ember.models.api.responses import (
    ChatStream,
    TokenLogprob,
    Usage,
    chat_completion,
    completion_logprobs,
    now,
    text_completion,
    text_completion_chunk,
)
from ember.models.api.sse import SSE_DONE, sse_data
from ember.models.constrain.session import ConstraintSpec
from ember.models.engine.logprob_types import PromptTokenLogprob
from ember.models.server.generation import (
    GenerationEvent,
    GenerationInput,
    LogprobRecord,
    stream_generation,
)
from ember.models.server.inputs import (
    COMPLETION_FIELDS,
    ChatInput,
    chat_input,
    generation_input,
    logprob_token,
    new_request_id,
    prompt_ids_for,
)
from ember.models.server.loading import ServedModel
from ember.models.server.prompt_logprobs import echoed_tokens, vllm_prompt_logprobs
from ember.models.server.state import ServerState
from ember.models.server.wire import (
    ClientGone,
    model_not_found,
    read_json,
    sse_response,
    stream_error_payload,
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


def _usage(event: GenerationEvent, chat_in: ChatInput | None = None) -> Usage:
    thinking = chat_in.thinking if chat_in is not None else None
    reasoning = thinking.count if thinking is not None else None
    return Usage(event.prompt_tokens, event.completion_tokens, event.cached_tokens, reasoning)


# -- /v1/chat/completions ------------------------------------------------------------------------


async def chat_completions(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    request_id = new_request_id("chatcmpl-")
    # The engine's next step waits for this request while it is read and tokenized, so that
    # requests arriving together start together (AsyncEngine.expect).
    served.engine.expect(request_id)
    try:
        body = await read_json(request)
        chat = parse_chat_request(body, dialect="openai", max_temperature=None)
        state.check_model(served, chat.model)
        chat_in = chat_input(served, chat, request_id)
    except BaseException:
        served.engine.forget(request_id)
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
    pieces: list[str] = []
    records: list[LogprobRecord] = []
    last = None
    scored: tuple[PromptTokenLogprob, ...] | None = None
    async for event in stream_generation(served, state.metrics, chat_in.generation):
        pieces.append(event.text)
        records.extend(event.logprobs)
        if event.prompt_logprobs is not None:
            scored = event.prompt_logprobs
        if chat_in.thinking is not None:
            chat_in.thinking.feed(event.token_ids)
        last = event
    assert last is not None and last.finish_reason is not None
    total = OutputAccumulator()
    total.add(chat_in.parser.feed("".join(pieces)))
    total.add(chat_in.parser.finish())
    answer = chat_completion(
        id=chat_in.generation.request_id,
        created=now(),
        model=served.name,
        output=total.result(),
        finish_reason=last.finish_reason,
        usage=_usage(last, chat_in),
        logprobs=token_logprobs(served, records) if chat.sampling.logprobs else None,
        matched_stop=last.matched_stop,
    )
    if chat.prompt_logprobs is not None:
        # vLLM's: the rendered prompt's tokens, on the response object (completions put
        # them in the choice).
        assert scored is not None  # the request asked the engine for them
        answer["prompt_logprobs"] = vllm_prompt_logprobs(served, scored, chat.prompt_logprobs)
    return answer


async def _chat_stream(
    state: ServerState, served: ServedModel, chat: ChatRequest, chat_in: ChatInput
) -> AsyncIterator[bytes]:
    chunks = chat_chunks(state, served, chat, chat_in)
    try:
        async for batch in chunks:
            yield b"".join(sse_data(chunk) for chunk in batch)
        yield SSE_DONE
    finally:  # closing it aborts the request in the engine
        await chunks.aclose()


async def chat_chunks(
    state: ServerState, served: ServedModel, chat: ChatRequest, chat_in: ChatInput
) -> AsyncIterator[list[dict]]:
    """The chunks of one streamed answer, a list per engine step (one write); a failure midway
    is a last ``{"error"}`` payload. ``/v1/responses`` translates the same chunks."""
    stream = ChatStream(
        id=chat_in.generation.request_id,
        created=now(),
        model=served.name,
        parser=chat_in.parser,
        include_usage=chat.include_usage,
        continuous_usage=chat.continuous_usage,
    )
    stream.usage = Usage(len(chat_in.generation.prompt_ids), 0)
    yield [stream.start()]
    events = stream_generation(served, state.metrics, chat_in.generation)
    want_logprobs = chat.sampling.logprobs
    try:
        async for event in events:
            if chat_in.thinking is not None:
                chat_in.thinking.feed(event.token_ids)
            stream.usage = _usage(event, chat_in)
            logprobs = token_logprobs(served, event.logprobs) if want_logprobs else None
            chunks = stream.text(event.text, logprobs)
            if event.finished:
                reason = event.finish_reason or "stop"
                chunks += stream.finish(reason, _usage(event, chat_in), event.matched_stop)
            if chunks:
                yield chunks
    except EmberError as error:
        yield [stream_error_payload(error)]
    finally:
        await events.aclose()


# -- /v1/completions -----------------------------------------------------------------------------


def _json_constraint(completion: CompletionRequest) -> ConstraintSpec | None:
    if completion.regex is not None:
        return ConstraintSpec(regex=completion.regex)
    fmt = completion.response_format
    if fmt.type == "json_object" or (fmt.type == "json_schema" and fmt.schema is None):
        return ConstraintSpec(json="object")
    if fmt.type == "json_schema":
        return ConstraintSpec(json="schema", schema=fmt.schema)
    return None


async def completions(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    request_id = new_request_id("cmpl-")
    served.engine.expect(request_id)  # as in chat_completions
    try:
        body = await read_json(request)
        completion = parse_completion_request(body)
        state.check_model(served, completion.model)
        prompt_ids = prompt_ids_for(
            served, completion.prompt, completion.prompt_token_ids, completion.add_special_tokens
        )
        generation = generation_input(
            served,
            request_id,
            prompt_ids,
            completion.sampling,
            constraint=_json_constraint(completion),
            skip_special_tokens=completion.skip_special_tokens,
            fields=COMPLETION_FIELDS,
        )
    except BaseException:
        served.engine.forget(request_id)
        raise
    prefix = ""
    if completion.echo:
        prefix = completion.prompt or served.tokenizer.decode(prompt_ids)
    if completion.stream:
        return sse_response(_completion_stream(state, served, completion, generation, prefix))
    try:
        answer = await unless_disconnected(
            request, _completion_answer(state, served, completion, generation, prefix)
        )
    except ClientGone:
        return Response(status_code=499)
    return JSONResponse(answer)


async def _completion_answer(
    state: ServerState,
    served: ServedModel,
    completion: CompletionRequest,
    generation: GenerationInput,
    prefix: str,
) -> dict:
    pieces, records, last = [prefix], [], None
    scored: tuple[PromptTokenLogprob, ...] | None = None
    async for event in stream_generation(served, state.metrics, generation):
        pieces.append(event.text)
        records.extend(event.logprobs)
        if event.prompt_logprobs is not None:
            scored = event.prompt_logprobs
        last = event
    assert last is not None and last.finish_reason is not None
    logprobs = None
    if completion.sampling.logprobs:
        tokens = token_logprobs(served, records, sampled_in_top=True)
        logprobs = completion_logprobs(tokens, len(prefix))
        if completion.echo:
            assert scored is not None  # echo with logprobs asks the engine for them
            echoed = _echoed(served, completion, generation, scored)
            # One run of offsets over prompt and output tokens, as vLLM counts them.
            logprobs = completion_logprobs(echoed + tokens)
    answer = text_completion(
        id=generation.request_id,
        created=now(),
        model=served.name,
        text="".join(pieces),
        finish_reason=last.finish_reason,
        usage=_usage(last),
        logprobs=logprobs,
        matched_stop=last.matched_stop,
    )
    if scored is not None:  # vLLM's, whenever the prompt was scored
        top = completion.sampling.prompt_logprobs or 0
        if completion.prompt_logprobs is not None:
            top = completion.prompt_logprobs
        answer["choices"][0]["prompt_logprobs"] = vllm_prompt_logprobs(served, scored, top)
    return answer


def _echoed(
    served: ServedModel,
    completion: CompletionRequest,
    generation: GenerationInput,
    scored: tuple[PromptTokenLogprob, ...],
) -> list[TokenLogprob]:
    """The echoed prompt's entries of the logprobs object (``logprobs`` alternatives each)."""
    return echoed_tokens(served, generation.prompt_ids, scored, completion.sampling.top_logprobs)


async def _completion_stream(
    state: ServerState,
    served: ServedModel,
    completion: CompletionRequest,
    generation: GenerationInput,
    prefix: str,
) -> AsyncIterator[bytes]:
    rid, created, name = generation.request_id, now(), served.name
    events = stream_generation(served, state.metrics, generation)
    offset = len(prefix)
    usage_so_far = Usage(len(generation.prompt_ids), 0)
    include_usage, continuous = completion.include_usage, completion.continuous_usage

    def chunk(text: str, **fields: object) -> dict:
        return text_completion_chunk(
            id=rid,
            created=created,
            model=name,
            text=text,
            include_usage=include_usage,
            usage=usage_so_far if continuous else None,
            **fields,  # type: ignore[arg-type]
        )

    # With logprobs the echoed prompt waits for the first event, which brings its logprobs
    # (vLLM also sends it with the first output).
    echo_waits = bool(prefix) and completion.sampling.logprobs
    try:
        if prefix and not echo_waits:
            yield sse_data(chunk(prefix))
        async for event in events:
            if echo_waits and event.prompt_logprobs is not None:
                echo_waits = False
                echoed = _echoed(served, completion, generation, event.prompt_logprobs)
                yield sse_data(chunk(prefix, logprobs=completion_logprobs(echoed)))
            usage_so_far = _usage(event)
            logprobs = None
            if completion.sampling.logprobs:
                tokens = token_logprobs(served, event.logprobs, sampled_in_top=True)
                logprobs = completion_logprobs(tokens, offset)
            offset += len(event.text)
            if not (event.text or event.finished or logprobs):
                continue
            out = sse_data(
                chunk(
                    event.text,
                    finish_reason=event.finish_reason if event.finished else None,
                    logprobs=logprobs,
                    matched_stop=event.matched_stop,
                )
            )
            if event.finished and include_usage:
                usage = {
                    "id": rid,
                    "object": "text_completion",
                    "created": created,
                    "model": name,
                    "choices": [],
                    "usage": _usage(event).to_dict(),
                }
                out += sse_data(usage)
            yield out
        yield SSE_DONE
    except EmberError as error:
        yield sse_data(stream_error_payload(error)) + SSE_DONE
    finally:
        await events.aclose()


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
