"""One request's generation as the HTTP layer sees it: token ids in, text pieces out.

``stream_generation`` submits the prompt to the ``AsyncEngine`` and turns each engine step into
a ``GenerationEvent``: the new tokens, the text they complete (incremental detokenization, stop
strings matched and held back by ``StopChecker``), their logprobs when asked, and at the end the
finish reason and usage. A stop string ends the request here (the engine only knows token ids):
leaving the engine's stream aborts the request there, so its pages are freed at once. Leaving
early for any other reason (the client went away, the task was cancelled) aborts it the same way.

It records the request's latencies in ``ServerMetrics``: time to first token, the gap between
consecutive token events, end to end.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ember.errors import ContextLengthExceeded, EmberError, InvalidModelInput
from ember.models.constrain.grammar import Grammar
from ember.models.constrain.session import ConstraintSpec
from ember.models.engine.logprob_types import PromptTokenLogprob, clamp_logprob
from ember.models.sampling import SamplingParams, StopChecker
from ember.models.server.answer_ids import AbortTicket
from ember.models.server.caller_id import caller_note
from ember.models.server.loading import ServedModel
from ember.models.server.metrics import ServerMetrics


@dataclass(frozen=True, slots=True)
class LogprobRecord:
    """One generated token's log probability and the most likely alternatives."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class GenerationInput:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams  # max_tokens resolved (never None)
    constraint: ConstraintSpec | None = None
    skip_special_tokens: bool = True
    # Special token ids kept in the text although skipped otherwise: a chat parser's markers
    # (``<think>``, tool-call tokens), so that role tokens a model emits never reach content.
    keep_special: frozenset[int] = frozenset()
    # vLLM's include_stop_str_in_output (SGLang's no_stop_trim): the stop string, or the stop
    # token's text, that ends the output stays at its end.
    include_stop_str: bool = False
    # vLLM's and SGLang's cache_salt: prefix-cache pages are shared only under the same salt.
    cache_salt: str | None = None
    # The answer's id where it is not request_id (x-request-id's): the answer carries it.
    answer_id: str | None = None
    # The request's registration with /abort_request (answer_ids.py), every choice's; the
    # route opens it at parse time and closes it when the answer ends. None: not abortable
    # before it reaches the engine (a health check's probe).
    ticket: AbortTicket | None = None
    choice: int = 0  # which choice of the request this is (``choices.choice_inputs``)
    arrival: float = field(default_factory=time.perf_counter)


@dataclass(slots=True)
class GenerationEvent:
    text: str  # text completed by this step's tokens (stop strings cut, held-back text kept)
    token_ids: list[int]
    logprobs: list[LogprobRecord]
    finished: bool = False
    finish_reason: str | None = None  # stop | length | abort
    matched_stop: str | int | None = None  # SGLang's: the stop string or token id (EOS too)
    stop_reason: str | int | None = None  # vLLM's: the stop string or stop_token_ids entry
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # The prompt's logprobs (from the request's start token on), on the first event only, when
    # the request asked (SamplingParams.prompt_logprobs).
    prompt_logprobs: tuple[PromptTokenLogprob, ...] | None = None


def check_request(served: ServedModel, request: GenerationInput) -> None:
    """Reject what the engine could never serve, before any response starts (400s). Errors
    name the engine's fields (``prompt``, ``max_tokens``); ``inputs.generation_input`` renames
    them to the request's own."""
    vocab = served.config.vocab_size
    bad = next((t for t in request.prompt_ids if not 0 <= t < vocab), None)
    if bad is not None:
        raise InvalidModelInput(
            "prompt", f"token id {bad} is outside the vocabulary (0..{vocab - 1})"
        )
    served.llm.prepare_request(
        request.prompt_ids, None, request.params, cache_salt=request.cache_salt
    )


def max_tokens_for(
    served: ServedModel,
    prompt_tokens: int,
    asked: int | None,
    name: str = "max_tokens",
    prompt_name: str = "messages",
) -> int:
    """``asked``, or the rest of the context window; a request that cannot fit is a 400.
    ``name``: the request's word for the output limit (``max_new_tokens`` in /generate);
    ``prompt_name`` its word for the input (``prompt`` in /v1/completions: a completion
    request has no messages). The message opens with OpenAI's (and vLLM's) words, which
    clients match on, then says what ember would accept."""
    context = served.context_length
    room = context - prompt_tokens
    if room < 1:
        raise ContextLengthExceeded(
            "prompt",
            f"This model's maximum context length is {context} tokens. However, your "
            f"{prompt_name} resulted in {prompt_tokens} tokens. Please reduce the length of the "
            f"{prompt_name}: the prompt has {prompt_tokens} tokens; this model serves at most "
            f"{context - 1} prompt tokens",
        )
    if asked is None:
        return room
    if asked > room:
        raise ContextLengthExceeded(
            "max_tokens",
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{prompt_tokens + asked} tokens ({prompt_tokens} in the {prompt_name}, {asked} in "
            f"the completion). Please reduce the length of the {prompt_name} or completion: "
            f"{name} is {asked}, but the prompt ({prompt_tokens} tokens) leaves room for {room} "
            f"in the {context}-token context window",
        )
    return asked


def _vllm_stop_reason(
    matched: str | int | None, params: SamplingParams, tokenizer_eos: int | None
) -> str | int | None:
    """vLLM's ``stop_reason``: null when the tokenizer's own EOS ended the output (SGLang's
    ``matched_stop`` names it), the stop string or the stop token id otherwise. vLLM moves
    generation_config.json's other end tokens (Kimi's ``<|im_end|>``, GLM's ``<|user|>``) into
    the request's stop_token_ids (``SamplingParams.update_from_generation_config``), so ending on
    one of them names it."""
    if matched == tokenizer_eos and not params.ignore_eos:
        return None
    return matched


async def stream_generation(
    served: ServedModel, metrics: ServerMetrics, request: GenerationInput
) -> AsyncIterator[GenerationEvent]:
    params = request.params
    skip = request.skip_special_tokens
    tokenizer = served.tokenizer
    eos_id = tokenizer.special_id("eos_token")  # vLLM's stop_reason is null for it alone
    rid = request.request_id

    # The parser's markers reach it in place, but (special tokens being skipped) they are no
    # text of the user's: stop strings are searched in the text without them, as vLLM does.
    markers = {i: tokenizer.decode([i]) for i in request.keep_special} if skip else {}

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=skip)

    checker = StopChecker(
        params,
        decode,
        served.eos_token_ids,
        context_ids=request.prompt_ids[-5:],
        markers=markers,
        include_stop_str=request.include_stop_str,
    )
    grammar = None
    ticket = request.ticket
    early = ticket is not None and ticket.aborted(request.choice)  # no grammar to build then
    if request.constraint is not None and not early:
        grammar = await _built_grammar(served, metrics, request)
        if grammar is None:  # aborted (/abort_request) while its grammar was being built
            prompt = len(request.prompt_ids)
            yield GenerationEvent(
                "", [], [], finished=True, finish_reason="abort", prompt_tokens=prompt
            )
            return
    # An earlier request under this id whose client left is still in the engine until its next
    # step: its grammar is keyed by the id too, so the new one's waits for it to go.
    drain = await served.engine.drained(rid)
    if drain == "aborted" or (ticket is not None and ticket.aborted(request.choice)):
        # /abort_request while it was taken in or waited: it never reached the engine. No
        # await from here to the submission below: an abort that comes later finds it there.
        served.engine.forget(rid)  # announced by the route: no step may wait for it
        _finished(served, metrics, request, "abort", 0, 0, None)
        prompt = len(request.prompt_ids)
        yield GenerationEvent(
            "", [], [], finished=True, finish_reason="abort", prompt_tokens=prompt
        )
        return
    if drain == "busy" or served.engine.in_progress(rid):
        # Only /generate lets the client choose the id (``rid``). A second request under a
        # taken id would replace, then release, the first one's grammar before the engine
        # refused it; nothing is registered until the id is known to be free (no await
        # between this check and the submission below, so it cannot be taken meanwhile).
        # A client's error (400), not the server's: not counted as a failed request.
        served.engine.forget(rid)
        why = (
            "still leaving the engine (its client left; retry)"
            if drain == "busy"
            else "in use by a request in progress"
        )
        raise InvalidModelInput("rid", f"request id {rid!r} is {why}")
    if grammar is not None:
        served.sampler.constrain(rid, grammar)
    stream = served.engine.generate(
        rid, request.prompt_ids, sampling=params, cache_salt=request.cache_salt
    )
    outcome, cached, last, first = "abort", 0, 0.0, None
    try:
        async for out in stream:
            now = time.perf_counter()
            if last == 0.0:
                first = now - request.arrival
                metrics.ttft.observe(first)
            else:
                metrics.itl.observe(now - last)
            last = now
            metrics.tokens_generated(now, len(out.new_token_ids))
            cached = out.usage.cached_tokens
            event = GenerationEvent("", [], [], prompt_tokens=len(request.prompt_ids))
            event.prompt_logprobs = out.prompt_logprobs
            pieces: list[str] = []
            delta = None
            for index, token in enumerate(out.new_token_ids):
                delta = checker.push(token)
                event.token_ids.append(token)
                if index < len(out.logprobs):
                    lp = out.logprobs[index]
                    # Clamped here, for every route: under a grammar most of the top-k are -inf.
                    top = tuple((t, clamp_logprob(v)) for t, v in lp.top)
                    event.logprobs.append(LogprobRecord(token, clamp_logprob(lp.logprob), top))
                pieces.append(delta.text)
                if delta.finished:
                    break
            if delta is not None and delta.finished:
                event.finish_reason = delta.finish_reason or out.finish_reason or "stop"
                event.matched_stop = delta.stop_reason
                event.stop_reason = _vllm_stop_reason(delta.stop_reason, params, eos_id)
                if not out.finished:  # a stop string: the engine only sees token ids
                    served.engine.abort(rid, reason="stop")
            elif out.finished:
                tail = checker.finish()
                pieces.append(tail.text)
                event.finish_reason = out.finish_reason
            event.text = "".join(pieces)
            event.completion_tokens = checker.num_tokens
            event.cached_tokens = cached
            if event.finish_reason is not None:
                event.finished = True
                outcome = "ok" if event.finish_reason != "abort" else "abort"
                yield event
                return
            yield event
    except EmberError:
        outcome = "error"
        raise
    finally:
        await stream.aclose()  # an unfinished request is aborted in the engine
        served.sampler.release(rid)
        _finished(served, metrics, request, outcome, checker.num_tokens, cached, first)


async def _built_grammar(
    served: ServedModel, metrics: ServerMetrics, request: GenerationInput
) -> Grammar | None:
    """The request's grammar, waiting for its build if need be (``grammar_builds``: off the
    engine thread, before the request is admitted); ``None`` if it was aborted meanwhile. A
    request that ends here (aborted, client gone, build failed) is counted as finished."""
    assert request.constraint is not None
    grammar = served.grammars.cached(request.constraint)
    if grammar is not None:
        return grammar
    # The route announced the request to the engine (AsyncEngine.expect); no step should hold
    # back for one whose grammar is still to be built.
    served.engine.forget(request.request_id)
    outcome = "abort"
    try:
        # Builds take turns by tenant: the gateway's per-tenant cache_salt names it.
        grammar = await served.grammars.grammar(
            request.constraint, request.request_id, caller=request.cache_salt or ""
        )
        if grammar is not None:
            outcome = "ok"
        return grammar
    except EmberError:
        outcome = "error"
        raise
    finally:
        if outcome != "ok":
            _finished(served, metrics, request, outcome, 0, 0, None)


def _finished(
    served: ServedModel,
    metrics: ServerMetrics,
    request: GenerationInput,
    outcome: str,
    tokens: int,
    cached: int,
    first: float | None,
) -> None:
    latency = time.perf_counter() - request.arrival
    prompt = len(request.prompt_ids)
    metrics.request_finished(prompt, tokens, cached, latency, outcome, ttft=first)
    if served.log_requests:
        served.log(
            f"Finish: rid={request.request_id} {outcome}, prompt_tokens={prompt}, "
            f"completion_tokens={tokens}, cached_tokens={cached}, "
            f"e2e_latency={latency:.3f}s{caller_note()}"
        )
