"""SGLang's native endpoints: ``/generate`` (text or ``input_ids``, ``sampling_params`` with
``json_schema`` or ``regex`` for constrained decoding, ``stream``), ``/get_model_info``,
``/server_info`` (``/get_server_info``), ``/health_generate``, ``/flush_cache``.

``/flush_cache`` drops the prefix cache when no request is in (SGLang's answer and text; a 400
naming the waiting and running requests otherwise; ``?timeout=S`` waits for them up to S seconds).

``/generate`` answers as SGLang does: ``{"text", "output_ids", "meta_info": {"id",
"finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency", ...}}``
(a list of one when the prompt came as a batch of one, ``["text"]`` or ``[[ids]]``; a list of
n, one per choice, for ``sampling_params.n`` > 1, as SGLang expands the request into a batch);
streaming sends one such object per engine step with the text so far (with n > 1, per choice,
with its ``index``), then ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, replace

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

import ember
from ember.errors import EmberError
from ember.models.api.completion_request import (
    SGLANG_MAX_NEW_TOKENS,
    GenerateRequest,
    parse_generate_request,
)
from ember.models.api.schema_fields import carries_schemas
from ember.models.api.sse import SSE_DONE, sse_data
from ember.models.constrain.session import ConstraintSpec
from ember.models.server.choices import (
    ChoiceEvent,
    check_choices_fit,
    choice_inputs,
    stream_choices,
)
from ember.models.server.generate_answer import GenerateAnswer, shown_id
from ember.models.server.generation import (
    GenerationEvent,
    GenerationInput,
    stream_generation,
)
from ember.models.server.inputs import (
    check_rid_free,
    generation_input,
    new_request_id,
)
from ember.models.server.loading import ServedModel
from ember.models.server.metrics import ServerMetrics
from ember.models.server.prompt_intake import prompt_ids_for, taken_in
from ember.models.server.request_fields import RequestFields
from ember.models.server.state import ServerState
from ember.models.server.wire import (
    ClientGone,
    HTTPError,
    read_json_sized,
    sse_response,
    stream_error_payload,
    unless_disconnected,
)


def _state(request: Request) -> ServerState:
    return request.app.state.ember


# SGLang's /flush_cache answer, word for word: clients (bench_serving --flush-cache, RL
# frameworks) check the status, some the text as well.
# ember's tool-call format -> the --tool-call-parser value that names it (SGLang's names).
PARSER_NAMES = {"kimi": "kimi_k2"}
FLUSHED_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)


def _prompt_ids(served: ServedModel, parsed: GenerateRequest) -> list[int]:
    """The request's prompt ids; its text is checked by size first (``prompt_intake``)."""
    window = (parsed.sampling.max_tokens, _fields(parsed))
    return prompt_ids_for(served, parsed.text, parsed.input_ids, window=window)


def _input(
    served: ServedModel,
    parsed: GenerateRequest,
    prompt_ids: list[int] | None = None,
    request_id: str | None = None,
) -> GenerationInput:
    """``request_id``: the engine id the route chose (``rid``, checked free, or a new one)."""
    constraint = None
    if parsed.json_schema is not None:
        constraint = ConstraintSpec(
            json="schema", schema=parsed.json_schema, schema_path="/sampling_params/json_schema"
        )
    elif parsed.regex is not None:
        constraint = ConstraintSpec(regex=parsed.regex, regex_path="/sampling_params/regex")
    if prompt_ids is None:
        prompt_ids = _prompt_ids(served, parsed)
    sampling = parsed.sampling
    if sampling.max_tokens is None:
        # SGLang's default max_new_tokens, clipped to what the context leaves as SGLang's
        # scheduler clips it (a prompt that leaves no room at all is still refused).
        room = served.context_length - len(prompt_ids)
        sampling = replace(sampling, max_tokens=max(1, min(SGLANG_MAX_NEW_TOKENS, room)))
    generation = generation_input(
        served,
        request_id or parsed.rid or new_request_id(""),
        prompt_ids,
        sampling,
        constraint=constraint,
        skip_special_tokens=parsed.skip_special_tokens,
        fields=_fields(parsed),
    )
    # SGLang's no_stop_trim: the stop string or stop token's text stays in the text.
    generation = replace(
        generation, include_stop_str=parsed.no_stop_trim, cache_salt=parsed.cache_salt
    )
    check_choices_fit(served, generation, parsed.n, sampling.max_tokens, "/sampling_params/n")
    return generation


def _fields(parsed: GenerateRequest) -> RequestFields:
    """SGLang's names for what the engine checks, so errors name the field that was sent."""
    return RequestFields(
        prompt="/text" if parsed.text is not None else "/input_ids",
        max_tokens="/sampling_params/max_new_tokens",
        sampling="/sampling_params",
        renames=(("min_tokens", "min_new_tokens"),),
    )


async def generate(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    # Announced while it is read and tokenized, as the OpenAI routes do (AsyncEngine.expect),
    # under a placeholder: the request's id (``rid``) may come in the body. The announcement
    # passes to the real id before the placeholder is dropped, so a hold never loses it.
    placeholder = new_request_id("generate-intake-")
    served.engine.expect(placeholder)
    ticket = None
    try:
        body, size = await read_json_sized(request, structured_suffix=True)
        # Parsing compiles sampling_params' json_schema: off the loop when one is there.
        parsed = await taken_in(
            served,
            placeholder,
            size,
            schemas=carries_schemas(body),
            work=lambda: parse_generate_request(body),
        )
        if parsed.rid is not None:  # a 400 before any stream starts, each choice's id too
            check_rid_free(served, parsed.rid, parsed.n)
        request_id = parsed.rid or new_request_id("")
        # /abort_request finds it from here on, while its prompt is still taken in.
        ticket = served.answer_ids.open(request_id, None, parsed.n)
        ids = await taken_in(served, placeholder, size, lambda: _prompt_ids(served, parsed))
        generation = replace(_input(served, parsed, ids, request_id), ticket=ticket)
        served.engine.expect(generation.request_id)
    except BaseException:
        if ticket is not None:
            ticket.close()
        raise
    finally:
        served.engine.forget(placeholder)
    # With n > 1, meta_info.id is SGLang's name for each choice, <rid>_<i> (answer_ids.py): the
    # id an SGLang client aborts that choice by.
    answers = [
        GenerateAnswer(served, parsed, one, shown_id(request_id, one.choice, parsed.n))
        for one in choice_inputs(generation, parsed.n)
    ]
    if parsed.stream:
        return sse_response(_stream(state.metrics, answers))
    try:
        payloads = await unless_disconnected(request, _whole(state.metrics, answers))
    except ClientGone:
        return Response(status_code=499)
    # A batch (of one: larger ones are refused) is answered with a list, as SGLang answers;
    # so are n choices (SGLang expands them into a batch), one entry per choice.
    if parsed.batched or parsed.n > 1:
        return JSONResponse(payloads)
    return JSONResponse(payloads[0])


def _events(metrics: ServerMetrics, answers: list[GenerateAnswer]) -> AsyncIterator[ChoiceEvent]:
    return stream_choices(answers[0].served, metrics, [answer.request for answer in answers])


def _add(answers: list[GenerateAnswer], item: ChoiceEvent) -> None:
    scored = item.event.prompt_logprobs
    if scored is not None and len(answers) > 1:
        # Choice 0 scores the prompt once for all (choices.py): every choice reports it.
        for other in answers[1:]:
            other.add_prompt(scored)
    answers[item.index].add(item.event)


async def _whole(metrics: ServerMetrics, answers: list[GenerateAnswer]) -> list[dict]:
    last: list[GenerationEvent | None] = [None] * len(answers)
    async for item in _events(metrics, answers):
        _add(answers, item)
        last[item.index] = item.event
    return [answer.payload(event) for answer, event in zip(answers, last, strict=True) if event]


async def _stream(metrics: ServerMetrics, answers: list[GenerateAnswer]) -> AsyncIterator[bytes]:
    events = _events(metrics, answers)
    try:
        async for item in events:
            _add(answers, item)
            payload = answers[item.index].payload(item.event)
            if len(answers) > 1:
                payload["index"] = item.index  # SGLang's, on each streamed entry of a batch
            yield sse_data(payload)
        yield SSE_DONE
    except EmberError as error:
        yield sse_data(stream_error_payload(error)) + SSE_DONE
    finally:
        await events.aclose()


async def get_model_info(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    config = served.config
    return JSONResponse(
        {
            "model_path": str(served.directory),
            "tokenizer_path": state.settings.tokenizer_path or str(served.directory),
            "served_model_name": served.name,
            "is_generation": True,
            "architectures": [config.architecture],
            "model_type": config.model_type,
            "context_length": served.context_length,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
        }
    )


async def server_info(request: Request) -> Response:
    state = _state(request)
    served = state.ready()
    settings = {k: v for k, v in asdict(state.settings).items() if k != "api_key"}
    bound = request.scope.get("server")
    if bound and settings["port"] == 0:  # --port 0: the port the OS picked, where it answers
        settings["port"] = bound[1]
    stats = asdict(served.llm.stats)
    quant = served.quantization
    return JSONResponse(
        {
            **settings,
            "served_model_name": served.name,
            "model_path": str(served.directory),
            "model_dtype": served.model_dtype,
            "max_total_num_tokens": served.kv.capacity_tokens,
            "kv_cache": asdict(served.kv),
            "context_length": served.context_length,
            "weight_bytes": served.weight_bytes,
            "weight_bytes_by_scheme": served.weight_bytes_by_scheme,
            "quantization_report": asdict(quant) if quant is not None else None,
            # Under the name --tool-call-parser takes (SGLang's), not ember's format name.
            "tool_call_parser": PARSER_NAMES.get(served.tool_format, served.tool_format),
            "load_seconds": served.load_seconds,
            "engine_stats": stats,
            # SGLang's per-scheduler state; sglang.bench_serving (--backend sglang) reads
            # internal_states[0] after every run, some versions without checking for it.
            "internal_states": [
                {
                    "last_gen_throughput": state.metrics.throughput.rate(time.perf_counter()),
                    "num_running_reqs": served.llm.stats.running,
                    "num_queue_reqs": served.llm.stats.waiting,
                }
            ],
            # SGLang answers its version number here, which clients parse: ember's number.
            "version": ember.__version__,
        }
    )


async def health_generate(request: Request) -> Response:
    """Generate one token end to end (the engine loop is alive and stepping); 503 at once when
    the engine is stalled, or when the token takes over ``--health-check-timeout`` seconds (as
    SGLang's, bounded by ``SGLANG_HEALTH_CHECK_TIMEOUT``)."""
    state = _state(request)
    served = state.ready()
    stall = state.stall()
    if stall is not None:
        raise HTTPError(503, f"the engine is stalled: {stall}", type="server_error")
    bound = state.settings.health_check_timeout
    parsed = parse_generate_request(
        {"input_ids": [0], "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    )
    generation = _input(served, parsed)
    try:
        events = stream_generation(served, ServerMetrics("health"), generation)
        async with asyncio.timeout(bound), contextlib.aclosing(events):  # closing aborts it
            async for _ in events:
                pass
    except TimeoutError:
        raise HTTPError(
            503,
            f"the engine generated no token in {bound:g} s (--health-check-timeout)",
            type="server_error",
        ) from None
    except EmberError as error:
        raise HTTPError(
            503, f"the engine failed to generate: {error}", type="server_error"
        ) from error
    return Response(status_code=200)


async def flush_cache(request: Request) -> Response:
    """Drop the prefix cache (GET or POST, as SGLang); 400 while requests are in."""
    served = _state(request).ready()
    raw = request.query_params.get("timeout", "0")
    try:
        timeout = float(raw)
    except ValueError:
        timeout = -1.0
    if not 0.0 <= timeout < float("inf"):
        raise HTTPError(
            400,
            f"Invalid value for query parameter 'timeout': expected seconds >= 0, got {raw!r}",
            param="timeout",
        )
    result = await served.engine.flush_cache(timeout)
    if result.flushed:
        return PlainTextResponse(FLUSHED_TEXT)
    return PlainTextResponse(result.message + "\n", status_code=400)
