"""Validated API requests (``ember.models.api``) -> what the engine runs (``GenerationInput``).

A chat request is rendered with the checkpoint's chat template and tokenized (``prompt_intake``,
which refuses a prompt too long by its size alone before tokenizing it); its
``response_format`` / ``tool_choice`` become a grammar (``constraint_for``), and the output
parser is chosen for the model's family and for where the prompt leaves the model (inside
``<think>``, free to open it, thinking off). A completion or ``/generate`` request is tokenized
as is (``prompt_intake.prompt_ids_for``), or taken as token ids.

Sampling fields map onto ``SamplingParams`` (its checks name the field: ``temperature``,
``top_logprobs``...); the engine samples each request with them, and a grammar (when the
request is constrained) is registered with the server's sampler.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

from ember.errors import ContextLengthExceeded, InvalidModelInput
from ember.models.api.chat_request import ChatRequest, SamplingOptions
from ember.models.api.constraints import constraint_for, output_parser_for
from ember.models.api.errors import InvalidRequestField
from ember.models.api.output_parser import ChatOutputParser, reasoning_prefix
from ember.models.api.reasoning_tokens import ReasoningCounter
from ember.models.api.tool_values import JsonBranches
from ember.models.constrain.session import ConstraintSpec
from ember.models.constrain.tool_grammars import (
    THINK_BEGIN,
    THINK_END,
    ReasoningPrefix,
    family_markers,
)
from ember.models.sampling import SamplingParams
from ember.models.server.answer_ids import names
from ember.models.server.choices import check_choices_fit
from ember.models.server.generation import GenerationInput, check_request, max_tokens_for
from ember.models.server.loading import ServedModel
from ember.models.server.prompt_intake import chat_prompt_ids, taken_in
from ember.models.server.request_fields import CHAT_FIELDS, RequestFields


@dataclass(slots=True)
class ChoiceReader:
    """Reads one choice's output: its chat parser (content, reasoning, tool calls) and its
    reasoning-token count (None: the model's markers are not single tokens)."""

    parser: ChatOutputParser
    thinking: ReasoningCounter | None = None


@dataclass(slots=True)
class ChatInput:
    generation: GenerationInput  # choice 0's (``choices.choice_inputs`` derives the others)
    readers: list[ChoiceReader]  # one per choice (``n``)
    reasoning: ReasoningPrefix
    response_id: str = ""  # the answer's id (caller_id.answer_id); the request id when empty


def new_request_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def own_request_id(served: ServedModel, announced: str, rid: str | None, n: int = 1) -> str:
    """The request's engine id: SGLang's ``rid`` when the body brings one (chat, completions),
    else ``announced``, the route's own. A rid in use is refused as /generate refuses it
    (``check_rid_free``), before any stream starts (``stream_generation`` checks again where
    the id is taken, and waits for one still draining). The announcement passes to the rid
    before the route's own is dropped, so a hold never loses it."""
    if rid is None:
        return announced
    check_rid_free(served, rid, n)
    served.engine.expect(rid)
    served.engine.forget(announced)
    return rid


def check_rid_free(served: ServedModel, rid: str, n: int) -> None:
    """Refuse (400 naming ``rid``) a rid that would find, or be found with, a request in
    progress: every id the new request would be found by (``answer_ids.names``: its choices'
    ``<rid>-<i>``, and SGLang's ``<rid>_<i>`` with ``n`` > 1) is checked against every id a
    registered request is found by (its answer's id too, ``chatcmpl-<x-request-id>``), and
    against the engine's ids: a collision would otherwise fail the request midway, after its
    first choices had streamed, or let one abort end both."""
    for name, choice in names(rid, None, n):
        if served.engine.in_progress(name) or served.answer_ids.holds(name):
            whose = "" if choice is None else f" (choice {choice} of {n} is found as {name!r})"
            raise InvalidRequestField(
                "/rid",
                f"a request id not in use by a request in progress{whose}; {name!r} is in use",
                repr(rid),
            )


async def chat_input_taken_in(
    served: ServedModel, request: ChatRequest, request_id: str, body_bytes: int, schemas: bool
) -> ChatInput:
    """``chat_input`` with its prompt, taken in as ``taken_in`` decides (off the loop for a
    large body or one that carries schemas): its constraint checks GLM's tool values
    (``constraint_for``), which compiles them."""
    return await taken_in(
        served,
        request_id,
        body_bytes,
        schemas=schemas,
        work=lambda: chat_input(served, request, request_id, chat_prompt_ids(served, request)),
    )


def chat_input(
    served: ServedModel,
    request: ChatRequest,
    request_id: str,
    prompt_ids: list[int] | None = None,
) -> ChatInput:
    """The engine input of a chat request; ``prompt_ids``: its ``chat_prompt_ids`` when the
    route took them in already (off the event loop, for a large request)."""
    tokenizer = served.tokenizer
    if prompt_ids is None:
        prompt_ids = chat_prompt_ids(served, request)
    prompt_ids = truncated(served, prompt_ids, request.truncate_prompt_tokens)
    prompt_end = tokenizer.decode(prompt_ids[-8:])  # does the template leave us inside <think>?
    reasoning = reasoning_prefix(prompt_end, enable_thinking=request.enable_thinking)
    try:
        constraint = constraint_for(request, tool_format=served.tool_format, reasoning=reasoning)
    finally:
        request.automata.release()  # used by the GLM check; not held while the answer streams
    # The special tokens the parser reads stay in the text it sees (all others are skipped);
    # with skip_special_tokens it keeps them from the client wherever it does not consume them.
    # SGLang's separate_reasoning false: the parser leaves reasoning in content (the grammar
    # still lets the model think first).
    parsed_reasoning = reasoning if request.separate_reasoning else "off"
    keep = parser_markers(served, parsed_reasoning, tools=bool(request.active_tools))
    drop = [tokenizer.decode([i]) for i in sorted(keep)] if request.skip_special_tokens else []
    readers = []

    def undeclared(name: str) -> None:
        # SGLang's warning, so an operator can see why a tool call never reached the client.
        served.log(
            f"{request_id}: dropped a call to undefined function {name!r} (not in tools)",
            "warning",
        )

    branches = JsonBranches()  # compiled once for the request, not once per choice
    for _ in range(request.n):
        parser = output_parser_for(
            request,
            tool_format=served.tool_format,
            reasoning=parsed_reasoning,
            drop=drop,
            on_undeclared=undeclared,
            branches=branches,
        )
        readers.append(ChoiceReader(parser, reasoning_counter(served, parser, reasoning)))
    generation = generation_input(
        served,
        request_id,
        prompt_ids,
        request.sampling,
        constraint=constraint,
        skip_special_tokens=request.skip_special_tokens,
        keep_special=keep,
        fields=RequestFields(max_tokens=f"/{request.max_tokens_field}"),
    )
    generation = replace(
        generation, include_stop_str=request.include_stop_str, cache_salt=request.cache_salt
    )
    check_choices_fit(served, generation, request.n, request.sampling.max_tokens)
    return ChatInput(generation, readers, reasoning)


def reasoning_counter(
    served: ServedModel, parser: ChatOutputParser, reasoning: ReasoningPrefix
) -> ReasoningCounter | None:
    """Counts the answer's reasoning tokens on the ids, by the parser's rules; None when
    ``</think>`` is no single special token here (the count could only be guessed)."""
    tokenizer = served.tokenizer

    def special(text: str | None) -> int | None:
        token = tokenizer.backend.token_to_id(text) if text else None
        return token if token is not None and token in tokenizer.special_ids else None

    end = special(THINK_END)
    if end is None:
        return None
    section = parser.tools.start_marker if parser.tools is not None else None
    return ReasoningCounter.starting(
        reasoning,
        begin=special(THINK_BEGIN),
        ends=(end, special(section)),
        blank=lambda token: not tokenizer.decode([token]).strip(),
    )


def parser_markers(
    served: ServedModel, reasoning: ReasoningPrefix, *, tools: bool
) -> frozenset[int]:
    """The special tokens a chat output parser reads, as ids: the model's tool-call markers
    when the request has tools (without tools nothing parses them, so they are skipped as any
    special token: a model that starts a call anyway must not show its markup) and, unless
    thinking is off, ``<think>`` and ``</think>``."""
    tokenizer = served.tokenizer
    think = (THINK_BEGIN, THINK_END) if reasoning != "off" else ()
    texts = (*think, *(family_markers(served.tool_format) if tools else ()))
    ids = (tokenizer.backend.token_to_id(text) for text in texts)
    return frozenset(i for i in ids if i is not None and i in tokenizer.special_ids)


def generation_input(
    served: ServedModel,
    request_id: str,
    prompt_ids: list[int],
    options: SamplingOptions,
    *,
    constraint: ConstraintSpec | None = None,
    skip_special_tokens: bool = True,
    keep_special: frozenset[int] = frozenset(),
    fields: RequestFields = CHAT_FIELDS,
) -> GenerationInput:
    """The engine request for ``prompt_ids``; raises 400-type errors for what cannot be served,
    naming the request's own fields (``fields``)."""
    if constraint is not None and options.ignore_eos:
        raise InvalidRequestField(
            fields.pointer("ignore_eos"),
            "false when the output is constrained (the grammar ends the output with EOS)",
            "true",
        )
    try:
        return _generation_input(
            served,
            request_id,
            prompt_ids,
            options,
            constraint,
            skip_special_tokens,
            keep_special,
            fields.max_tokens_name,
            fields.prompt_name,
        )
    except InvalidRequestField:
        raise
    except InvalidModelInput as error:
        # The engine's checks know its own names (prompt, max_tokens, temperature...); the
        # kind of error (its OpenAI code: context_length_exceeded) stays.
        overflow = isinstance(error, ContextLengthExceeded)
        kind = ContextLengthExceeded if overflow else InvalidModelInput
        raise kind(fields.pointer(error.field), str(error)) from None


def _generation_input(
    served: ServedModel,
    request_id: str,
    prompt_ids: list[int],
    options: SamplingOptions,
    constraint: ConstraintSpec | None,
    skip_special_tokens: bool,
    keep_special: frozenset[int],
    max_tokens_name: str,
    prompt_name: str,
) -> GenerationInput:
    if not prompt_ids:
        raise InvalidModelInput("prompt", "the prompt has no tokens; expected at least one")
    options = served.sampling_defaults.fill(options)
    if options.logprobs_mode == "raw":  # an OpenAI route's: --logprobs-mode says which
        options = replace(options, logprobs_mode=served.openai_logprobs)
    max_tokens = max_tokens_for(
        served, len(prompt_ids), options.max_tokens, max_tokens_name, prompt_name
    )
    # SamplingParams checks name the field (temperature, top_logprobs, logit_bias...).
    params = replace(
        SamplingParams.from_options(options),
        max_tokens=max_tokens,
        bad_words_token_ids=bad_word_ids(served, options.bad_words),
    )
    if served.seeds is not None and params.seed is None and not params.greedy:
        # --random-seed: an unseeded request still samples, reproducibly from server start.
        params = replace(params, seed=served.seeds.getrandbits(63))
    generation = GenerationInput(
        request_id,
        prompt_ids,
        params,
        constraint=constraint,
        skip_special_tokens=skip_special_tokens,
        keep_special=keep_special,
    )
    check_request(served, generation)
    return generation


def truncated(served: ServedModel, prompt_ids: list[int], keep: int | None) -> list[int]:
    """vLLM's ``truncate_prompt_tokens``: the prompt's last ``keep`` tokens (-1: as many as
    the context length; more than it is refused, as vLLM refuses it)."""
    if keep is None:
        return prompt_ids
    limit = served.context_length
    if keep > limit:
        raise InvalidRequestField(
            "/truncate_prompt_tokens",
            f"at most the context length ({limit}), or -1",
            str(keep),
        )
    return prompt_ids[-(limit if keep == -1 else keep) :]


def bad_word_ids(served: ServedModel, words: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """vLLM's ``bad_words`` as token sequences: each word as it encodes at the start of a text
    and, when that is a different sequence of the same length, after a space (mid-text)."""
    out: list[tuple[int, ...]] = []
    for word in words:
        plain = tuple(served.tokenizer.encode(word.lstrip()))
        out.append(plain)
        spaced = tuple(served.tokenizer.encode(" " + word.lstrip()))
        if spaced[0] != plain[0] and len(spaced) == len(plain):
            out.append(spaced)
    return tuple(out)


def logprob_token(served: ServedModel, token_id: int) -> tuple[str, bytes | None]:
    """A token's text for logprobs, and its bytes when they are not whole UTF-8."""
    data = served.tokenizer.token_bytes[token_id] if token_id < served.tokenizer.vocab_size else b""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), data
