"""OpenAI's ``/v1/completions``: one prompt (text or token ids), ``n`` choices (``choices.py``),
``echo`` (with the prompt's logprobs when ``logprobs`` is set, as lm-eval-harness reads them),
vLLM's ``prompt_logprobs``, JSON ``response_format`` and ``regex`` constraints on every choice.

Streams carry each choice's ``index`` and text; each choice ends with its own finish chunk and
the usage chunk (``stream_options.include_usage``) comes once, after the last. ``best_of`` other
than ``n`` is refused (``completion_request.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ember.errors import EmberError
from ember.models.api.completion_request import CompletionRequest, parse_completion_request
from ember.models.api.read_fields import ignored_note, tracked
from ember.models.api.responses import (
    TokenLogprob,
    completion_logprobs,
    now,
    text_choice,
    text_completion_chunk,
    text_completion_of,
)
from ember.models.api.schema_fields import carries_schemas
from ember.models.api.sse import SSE_DONE, sse_data
from ember.models.constrain.session import ConstraintSpec
from ember.models.engine.logprob_types import PromptTokenLogprob
from ember.models.server.caller_id import answer_id
from ember.models.server.chat_chunks import choice_usage, choices_usage
from ember.models.server.choices import check_choices_fit, choice_inputs, stream_choices
from ember.models.server.generation import GenerationEvent, GenerationInput, LogprobRecord
from ember.models.server.inputs import (
    generation_input,
    new_request_id,
    own_request_id,
    truncated,
)
from ember.models.server.loading import ServedModel
from ember.models.server.openai_routes import token_logprobs
from ember.models.server.prompt_intake import completion_prompt_ids, taken_in
from ember.models.server.prompt_logprobs import echoed_tokens, vllm_prompt_logprobs
from ember.models.server.request_fields import COMPLETION_FIELDS
from ember.models.server.state import ServerState
from ember.models.server.wire import (
    ClientGone,
    read_json_sized,
    sse_response,
    stream_error_payload,
    unless_disconnected,
)


def _json_constraint(completion: CompletionRequest) -> ConstraintSpec | None:
    if completion.regex is not None:
        return ConstraintSpec(regex=completion.regex)
    fmt = completion.response_format
    if fmt.type == "json_object" or (fmt.type == "json_schema" and fmt.schema is None):
        return ConstraintSpec(json="object")
    if fmt.type == "json_schema":
        return ConstraintSpec(json="schema", schema=fmt.schema, schema_strict=fmt.strict)
    return None


async def completions(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    served = state.ready()
    request_id = new_request_id("cmpl-")
    served.engine.expect(request_id)  # as in chat_completions
    ticket = None
    try:
        raw, size = await read_json_sized(request)
        body = tracked(raw)
        # Parsing compiles the request's schema: off the loop for a large body (review26) or
        # one that carries a schema or regex.
        completion = await taken_in(
            served,
            request_id,
            size,
            schemas=carries_schemas(raw),
            work=lambda: parse_completion_request(body),
        )
        note = ignored_note(body)
        if note is not None:
            served.log(f"{request_id}: {note}", "warning")
        state.check_model(served, completion.model)
        request_id = own_request_id(served, request_id, completion.rid, completion.n)
        # SGLang's: the answer carries the rid; else vLLM's cmpl-<x-request-id>.
        shown = completion.rid or answer_id("cmpl-", request_id)
        # /abort_request finds it from here on, while its prompt is still taken in.
        ticket = served.answer_ids.open(request_id, shown, completion.n)
        prompt_ids = await taken_in(
            served, request_id, size, lambda: completion_prompt_ids(served, completion)
        )
        kept = truncated(served, prompt_ids, completion.truncate_prompt_tokens)
        cut = len(kept) < len(prompt_ids)
        prompt_ids = kept
        generation = generation_input(
            served,
            request_id,
            prompt_ids,
            completion.sampling,
            constraint=_json_constraint(completion),
            skip_special_tokens=completion.skip_special_tokens,
            fields=COMPLETION_FIELDS,
        )
        generation = replace(
            generation,
            include_stop_str=completion.include_stop_str,
            cache_salt=completion.cache_salt,
            answer_id=shown if shown != request_id else None,
            ticket=ticket,
        )
        check_choices_fit(served, generation, completion.n, completion.sampling.max_tokens)
    except BaseException:
        served.engine.forget(request_id)
        if ticket is not None:
            ticket.close()
        raise
    prefix = ""
    if completion.echo:
        # A truncated prompt is echoed as the model saw it (what remained of it).
        text = None if cut else completion.prompt
        prefix = text or served.tokenizer.decode(prompt_ids)
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
    n = completion.n
    pieces: list[list[str]] = [[prefix] for _ in range(n)]
    records: list[list[LogprobRecord]] = [[] for _ in range(n)]
    last: list[GenerationEvent | None] = [None] * n
    scored: tuple[PromptTokenLogprob, ...] | None = None
    inputs = choice_inputs(generation, n)
    async for item in stream_choices(served, state.metrics, inputs):
        pieces[item.index].append(item.event.text)
        records[item.index].extend(item.event.logprobs)
        if item.event.prompt_logprobs is not None:
            scored = item.event.prompt_logprobs
        last[item.index] = item.event
    choices = []
    for index, event in enumerate(last):
        assert event is not None and event.finish_reason is not None
        logprobs = None
        if completion.sampling.logprobs:
            tokens = token_logprobs(served, records[index], sampled_in_top=True)
            logprobs = completion_logprobs(tokens, len(prefix))
            if completion.echo:
                assert scored is not None  # echo with logprobs asks the engine for them
                echoed = _echoed(served, completion, generation, scored)
                # One run of offsets over prompt and output tokens, as vLLM counts them.
                logprobs = completion_logprobs(echoed + tokens)
        text = "".join(pieces[index])
        choice = text_choice(
            index, text, event.finish_reason, logprobs, event.matched_stop, event.stop_reason
        )
        if scored is not None:  # vLLM's, whenever the prompt was scored: on every choice
            top = completion.sampling.prompt_logprobs or 0
            if completion.prompt_logprobs is not None:
                top = completion.prompt_logprobs
            choice["prompt_logprobs"] = vllm_prompt_logprobs(served, scored, top)
        choices.append(choice)
    return text_completion_of(
        id=generation.answer_id or generation.request_id,
        created=now(),
        model=served.name,
        choices=choices,
        usage=choices_usage(len(generation.prompt_ids), last),
    )


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
    rid, created = generation.answer_id or generation.request_id, now()
    name, n = served.name, completion.n
    events = stream_choices(served, state.metrics, choice_inputs(generation, n))
    offsets = [len(prefix)] * n
    prompt_tokens = len(generation.prompt_ids)
    latest: list[GenerationEvent | None] = [None] * n
    include_usage, continuous = completion.include_usage, completion.continuous_usage

    def chunk(index: int, text: str, cached: int = 0, **fields: object) -> dict:
        return text_completion_chunk(
            id=rid,
            created=created,
            model=name,
            text=text,
            include_usage=include_usage,
            usage=choice_usage(prompt_tokens, latest, index, cached=cached) if continuous else None,
            index=index,
            **fields,  # type: ignore[arg-type]
        )

    # With logprobs the echoed prompt waits for a choice's first event: choice 0's brings the
    # prompt's logprobs (vLLM also sends it with the first output), the others start after it.
    echo_waits = [bool(prefix) and completion.sampling.logprobs] * n
    # With continuous usage the plain echo waits for the first event too (choice 0's): it
    # brings the prompt's cached tokens, which vLLM's first chunk reports.
    echo_held = bool(prefix) and not echo_waits[0] and continuous
    scored: tuple[PromptTokenLogprob, ...] | None = None
    try:
        if prefix and not echo_waits[0] and not echo_held:
            yield b"".join(sse_data(chunk(index, prefix)) for index in range(n))
        async for item in events:
            index, event = item.index, item.event
            out = b""
            if echo_held:
                echo_held = False
                out += b"".join(
                    sse_data(chunk(other, prefix, cached=event.cached_tokens)) for other in range(n)
                )
            if event.prompt_logprobs is not None:
                scored = event.prompt_logprobs
            if echo_waits[index] and scored is not None:
                echo_waits[index] = False
                echoed = _echoed(served, completion, generation, scored)
                echo_logprobs = completion_logprobs(echoed)
                out += sse_data(chunk(index, prefix, event.cached_tokens, logprobs=echo_logprobs))
            latest[index] = event
            logprobs = None
            if completion.sampling.logprobs:
                tokens = token_logprobs(served, event.logprobs, sampled_in_top=True)
                logprobs = completion_logprobs(tokens, offsets[index])
            offsets[index] += len(event.text)
            if event.text or event.finished or logprobs:
                out += sse_data(
                    chunk(
                        index,
                        event.text,
                        finish_reason=event.finish_reason if event.finished else None,
                        logprobs=logprobs,
                        matched_stop=event.matched_stop,
                        stop_reason=event.stop_reason,
                    )
                )
            if out:
                yield out
        end = SSE_DONE
        if include_usage:  # once, after every choice finished
            usage = {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": name,
                "choices": [],
                "usage": choices_usage(prompt_tokens, latest).to_dict(),
            }
            end = sse_data(usage) + end
        yield end
    except EmberError as error:
        yield sse_data(stream_error_payload(error)) + SSE_DONE
    finally:
        await events.aclose()
