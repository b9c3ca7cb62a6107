"""Chat-completion requests, from OpenAI's ``/v1/chat/completions`` body or a Workers AI
family-B ``env.AI.run`` input (Kimi K2.x, GLM-4.7/5.x: ``messages`` or ``prompt``), into one
typed ``ChatRequest``. Unknown fields are tolerated, as OpenAI tolerates them; every invalid
field raises ``InvalidRequestField`` naming it. Defaults are Workers AI family B's
(temperature 1, top_p 1, penalties 0, n 1, parallel_tool_calls true, thinking on)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import (
    at,
    describe,
    logit_bias,
    optional_bool,
    optional_choice,
    optional_int,
    optional_number,
    optional_str,
    require_object,
    stop_sequences,
    token_id_list,
    wrong_type,
)
from ember.models.api.guided_fields import json_format
from ember.models.api.messages import ChatMessage, parse_messages
from ember.models.api.regex_fields import regex_field
from ember.models.api.request_options import (
    choice_count,
    given_fields,
    prompt_logprobs_field,
    stream_options,
)
from ember.models.api.server_fields import (
    include_stop_str,
    refuse_unsupported,
    request_rid,
    separate_reasoning,
)
from ember.models.api.tools import (
    FunctionTool,
    ResponseFormat,
    ToolChoice,
    parse_response_format,
    parse_tool_choice,
    parse_tools,
)
from ember.models.api.vllm_fields import (
    cache_salt,
    generation_prompt,
    token_bans,
    truncate_prompt_tokens,
)
from ember.models.constrain.automata import Automata
from ember.models.constrain.stop_regex import StopRegex

Dialect = Literal["openai", "workers"]
# Workers AI's schema for Kimi and GLM (reference/workers-api.md §1.4); SGLang has no cap.
WORKERS_AI_MAX_TEMPERATURE: float = 2  # "<= 2" in errors, as before
# Workers AI's schema caps repetition_penalty at 2; vLLM and SGLang take any value > 0.
WORKERS_AI_MAX_REPETITION_PENALTY: float = 2
# ``stop``: OpenAI's and Workers AI's schema allow 4 strings (the AI gateway keeps that rule);
# SGLang and vLLM cap none on their OpenAI routes, so the model server takes as many as its
# engine (and /generate) does.
MAX_STOP_STRINGS = 4
SERVER_MAX_STOP_STRINGS = 16
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
INT64 = 2**63


@dataclass(frozen=True)
class SamplingOptions:
    """Everything that steers token choice; names follow SGLang's SamplingParams.
    ``max_tokens`` None: the server's default (the rest of the context window)."""

    max_tokens: int | None = None
    min_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_regex: tuple[StopRegex, ...] = ()  # SGLang's /generate: compiled when parsed
    stop_token_ids: tuple[int, ...] = ()
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    logprobs: bool = False
    top_logprobs: int = 0
    ignore_eos: bool = False
    # The prompt's logprobs: None off, else the alternatives per position; from prompt token
    # prompt_logprobs_start (>= 1) on (completions' echo, vLLM's prompt_logprobs, SGLang's
    # logprob_start_len).
    prompt_logprobs: int | None = None
    prompt_logprobs_start: int = 1
    # The defaultable fields the request itself set (not null): the model server fills the
    # others from the checkpoint's generation_config.json (server/sampling_defaults.py).
    # (Provenance, not a value: two requests asking for the same things compare equal.)
    given: frozenset[str] = field(default=frozenset(), compare=False)
    logprobs_mode: str = "raw"  # or "processed" (SamplingParams.logprobs_mode)
    allowed_token_ids: tuple[int, ...] | None = None  # vLLM's (api/vllm_fields.py)
    bad_words: tuple[str, ...] = ()  # vLLM's, as text: the server encodes them


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[ChatMessage, ...]
    sampling: SamplingOptions
    model: str | None = None
    from_prompt: bool = False
    response_format: ResponseFormat = ResponseFormat()
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = ToolChoice("none")
    parallel_tool_calls: bool = True
    enable_thinking: bool = True
    clear_thinking: bool = False
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reasoning_effort: str | None = None
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False  # stream_options.continuous_usage_stats (vLLM)
    user: str | None = None
    # The field that set sampling.max_tokens, for errors (the newer name wins when both came).
    max_tokens_field: str = "max_tokens"
    # SGLang's and vLLM's: special tokens stay out of content and reasoning (those the output
    # parser reads are still shown to it); false shows all of them, as both servers do.
    skip_special_tokens: bool = True
    # vLLM's: wrap the templated prompt in the tokenizer's special tokens (a BOS) as well; off
    # by default, the template writes its own.
    add_special_tokens: bool = False
    prompt_logprobs: int | None = None  # vLLM's: alternatives per prompt token, as sent
    # SGLang's regex / vLLM's structured_outputs.regex (openai dialect only): the content,
    # after any reasoning, matches it in full.
    regex: str | None = None
    n: int = 1  # choices to generate (each its own sequence; the prompt is prefilled once)
    include_stop_str: bool = False  # vLLM's include_stop_str_in_output, SGLang's no_stop_trim
    separate_reasoning: bool = True  # SGLang's: false leaves the reasoning in content
    # vLLM's (api/vllm_fields.py): the template's generation prompt, continuing the final
    # message instead, and feeding only the prompt's last k tokens (-1: the context length).
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    truncate_prompt_tokens: int | None = None
    cache_salt: str | None = None  # vLLM's: prefix-cache pages shared only under the same salt
    rid: str | None = None  # SGLang's: the engine's request id, and the answer's (openai only)
    # The request's automaton budget as parsing left it (automata.py): its schemas' states
    # counted and their automata built, so constraint_for's GLM check draws on the same one
    # and reuses them instead of a fresh budget that builds them again (review35).
    automata: Automata = field(default_factory=Automata, compare=False, repr=False)

    @property
    def active_tools(self) -> tuple[FunctionTool, ...]:
        """The tools the model may call (none when tool_choice is none)."""
        if self.tool_choice.mode == "none":
            return ()
        if self.tool_choice.allowed is None:
            return self.tools
        return tuple(t for t in self.tools if t.name in self.tool_choice.allowed)

    def template_messages(self) -> list[dict]:
        return [m.to_template() for m in self.messages]

    def template_tools(self) -> list[dict] | None:
        """Tools for the chat template: all declared ones unless tool_choice is none."""
        return [t.to_template() for t in self.tools] if self.tool_choice.mode != "none" else None

    def template_arguments(self) -> dict[str, Any]:
        """Extra chat-template variables (``enable_thinking``, ``clear_thinking``, and any other
        ``chat_template_kwargs``)."""
        out = dict(self.template_kwargs)
        out["enable_thinking"] = self.enable_thinking
        out["clear_thinking"] = self.clear_thinking
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        return out


def parse_sampling(
    body: Mapping,
    path: str = "",
    *,
    max_temperature: float | None = WORKERS_AI_MAX_TEMPERATURE,
    max_repetition_penalty: float | None = WORKERS_AI_MAX_REPETITION_PENALTY,
    max_stop: int = MAX_STOP_STRINGS,
) -> SamplingOptions:
    """The sampling fields shared by chat and text completions. ``max_temperature``: Workers
    AI's schema caps it at 2 (the AI gateway); SGLang and vLLM have no cap (None: the model
    server, which refuses only a negative one). ``max_repetition_penalty`` likewise: 2 at the
    gateway, None (any value > 0) on the model server. ``max_stop``: stop strings, 4 at the
    gateway, ``SERVER_MAX_STOP_STRINGS`` on the model server."""
    max_completion = optional_int(body, "max_completion_tokens", path, minimum=1)
    max_tokens = optional_int(body, "max_tokens", path, minimum=1)
    logprobs = body.get("logprobs")
    top_logprobs = optional_int(body, "top_logprobs", path, minimum=0, maximum=20, default=0) or 0
    if logprobs is not None and not isinstance(logprobs, bool):
        raise wrong_type(at(path, "logprobs"), "true or false", logprobs)
    if top_logprobs and not logprobs:
        raise InvalidRequestField(
            at(path, "logprobs"), "true when top_logprobs is set", describe(logprobs)
        )
    top_k = optional_int(body, "top_k", path, minimum=-1)
    return SamplingOptions(
        max_tokens=max_completion if max_completion is not None else max_tokens,
        min_tokens=optional_int(body, "min_tokens", path, minimum=0, default=0) or 0,
        temperature=optional_number(
            body, "temperature", path, minimum=0, maximum=max_temperature, default=1.0
        ),  # type: ignore[arg-type]
        top_p=optional_number(body, "top_p", path, minimum=0, maximum=1, default=1.0),  # type: ignore[arg-type]
        top_k=top_k if top_k and top_k > 0 else None,
        min_p=optional_number(body, "min_p", path, minimum=0, maximum=1, default=0.0),  # type: ignore[arg-type]
        seed=optional_int(body, "seed", path, minimum=-INT64, maximum=2 * INT64 - 1),
        stop=stop_sequences(body, "stop", path, most=max_stop),
        # vLLM's and SGLang's extension on both OpenAI routes (ids that end the output).
        stop_token_ids=token_id_list(body, "stop_token_ids", path),
        frequency_penalty=optional_number(
            body, "frequency_penalty", path, minimum=-2, maximum=2, default=0.0
        ),  # type: ignore[arg-type]
        presence_penalty=optional_number(
            body, "presence_penalty", path, minimum=-2, maximum=2, default=0.0
        ),  # type: ignore[arg-type]
        repetition_penalty=optional_number(
            body,
            "repetition_penalty",
            path,
            minimum=0,
            maximum=max_repetition_penalty,
            default=1.0,
            exclusive_minimum=True,
        ),  # type: ignore[arg-type]
        logit_bias=logit_bias(body, path),
        logprobs=bool(logprobs),
        top_logprobs=top_logprobs,
        # SGLang's and vLLM's extension, sent by their benchmark clients for fixed output lengths.
        ignore_eos=optional_bool(body, "ignore_eos", path, False),
        given=given_fields(body, ("max_tokens", "max_completion_tokens")),
    )


def _thinking(body: Mapping, effort: str | None) -> tuple[bool, bool, dict[str, Any]]:
    """(enable_thinking, clear_thinking, the other template kwargs). ``reasoning_effort:
    "none"`` means no reasoning (OpenAI's meaning, and ``reasoning.effort`` on the Responses
    path), so it turns thinking off unless ``chat_template_kwargs.enable_thinking`` says."""
    default = effort != "none"
    value = body.get("chat_template_kwargs")
    if value is None:
        return default, False, {}
    kwargs = require_object(value, "/chat_template_kwargs")
    enable = optional_bool(kwargs, "enable_thinking", "/chat_template_kwargs", default)
    clear = optional_bool(kwargs, "clear_thinking", "/chat_template_kwargs", False)
    rest = {k: v for k, v in kwargs.items() if k not in ("enable_thinking", "clear_thinking")}
    return enable, clear, rest


def _responses_shape_hint(data: dict[str, Any]) -> str:
    """For a body in the Responses API's shape sent to a chat model: what to send instead."""
    if "input" not in data and "instructions" not in data:
        return ""
    return (
        " ('instructions' and 'input' are the Responses API's shape, which Workers AI takes for"
        " its gpt-oss models: for this model send messages=[{'role': 'system', 'content':"
        " instructions}, {'role': 'user', 'content': input}], or use /ai/v1/responses)"
    )


def parse_chat_request(
    body: object,
    *,
    dialect: Dialect = "openai",
    allow_images: bool = False,
    max_temperature: float | None = WORKERS_AI_MAX_TEMPERATURE,
    max_repetition_penalty: float | None = WORKERS_AI_MAX_REPETITION_PENALTY,
    max_stop: int = MAX_STOP_STRINGS,
    automata: Automata | None = None,
) -> ChatRequest:
    """Validate a chat request. ``dialect``: ``openai`` (``messages`` required; ``model`` optional)
    or ``workers`` (``env.AI.run`` family B: exactly one of ``messages`` and ``prompt``).
    ``max_temperature``, ``max_repetition_penalty``, ``max_stop``: see ``parse_sampling``.
    ``automata``: its schemas' budget (None: its own; a queued batch's requests share one)."""
    data = require_object(body, "/")
    for legacy in ("functions", "function_call"):
        if data.get(legacy) is not None:
            raise InvalidRequestField(
                f"/{legacy}",
                "'tools' and 'tool_choice' (the legacy functions API is not supported)",
                "a value",
                "unsupported_parameter",
            )
    model = optional_str(data, "model", "")
    from_prompt = False
    if dialect == "workers":
        has_messages, has_prompt = data.get("messages") is not None, data.get("prompt") is not None
        if has_messages == has_prompt:
            raise InvalidRequestField(
                "/",
                "exactly one of 'messages' or 'prompt'",
                "both" if has_messages else "neither" + _responses_shape_hint(data),
                "missing_required_parameter",
            )
        if has_prompt:
            prompt = data["prompt"]
            if not isinstance(prompt, str) or not prompt:
                raise wrong_type("/prompt", "a non-empty string", prompt)
            messages = (ChatMessage("user", prompt),)
            from_prompt = True
        else:
            messages = parse_messages(data["messages"], "/messages", allow_images=allow_images)
    else:
        # ``model`` may be left out, as SGLang and vLLM allow (a single-model server answers
        # with its own); a multi-model front door (the AI gateway) requires it itself.
        if data.get("messages") is None:
            raise InvalidRequestField(
                "/messages", "an array of messages", "nothing", "missing_required_parameter"
            )
        messages = parse_messages(data["messages"], "/messages", allow_images=allow_images)
    n = choice_count(data, "")
    stream = optional_bool(data, "stream", "", False)
    include_usage, continuous_usage = stream_options(data, stream)
    budget = Automata() if automata is None else automata  # one for every schema it carries
    tools = parse_tools(data.get("tools"), "/tools", budget)
    effort = optional_choice(data, "reasoning_effort", "", REASONING_EFFORTS, None)
    enable, clear, template_kwargs = _thinking(data, effort)
    sampling = parse_sampling(
        data,
        max_temperature=max_temperature,
        max_repetition_penalty=max_repetition_penalty,
        max_stop=max_stop,
    )
    prompt_logprobs = prompt_logprobs_field(data, stream)
    if prompt_logprobs is not None:
        sampling = replace(sampling, prompt_logprobs=prompt_logprobs, prompt_logprobs_start=1)
    response_format = parse_response_format(data.get("response_format"), "/response_format", budget)
    tool_choice = parse_tool_choice(data.get("tool_choice"), "/tool_choice", tools)
    regex = None
    generation, continue_final, truncate, salt, rid = True, False, None, None, None
    if dialect == "openai":  # vLLM's and SGLang's fields (guided_fields, server_fields...)
        response_format = json_format(data, "", response_format, budget)
        regex = regex_field(data, automata=budget)  # with its schemas, one budget
        refuse_unsupported(data)
        sampling = replace(sampling, **token_bans(data))
        generation, continue_final = generation_prompt(data, messages[-1].text())
        truncate = truncate_prompt_tokens(data)
        salt = cache_salt(data)
        rid = request_rid(data)
    if regex is not None:
        _regex_alone(response_format, tool_choice)
    return ChatRequest(
        messages=messages,
        automata=budget,
        sampling=sampling,
        model=model,
        from_prompt=from_prompt,
        response_format=response_format,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=optional_bool(data, "parallel_tool_calls", "", True),
        enable_thinking=enable,
        clear_thinking=clear,
        template_kwargs=template_kwargs,
        reasoning_effort=effort,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        user=optional_str(data, "user", ""),
        max_tokens_field=(
            "max_completion_tokens"
            if data.get("max_completion_tokens") is not None
            else "max_tokens"
        ),
        skip_special_tokens=optional_bool(data, "skip_special_tokens", "", True),
        add_special_tokens=optional_bool(data, "add_special_tokens", "", False),
        prompt_logprobs=prompt_logprobs,
        regex=regex,
        n=n,
        include_stop_str=dialect == "openai" and include_stop_str(data),
        separate_reasoning=dialect != "openai" or separate_reasoning(data),
        add_generation_prompt=generation,
        continue_final_message=continue_final,
        truncate_prompt_tokens=truncate,
        cache_salt=salt,
        rid=rid,
    )


def _regex_alone(response_format: ResponseFormat, tool_choice: ToolChoice) -> None:
    """One grammar per request (SGLang's rule): a regex leaves no room for a JSON format or
    for forced tool calls."""
    if response_format.type != "text":
        raise InvalidRequestField(
            "/response_format", "no JSON format beside a regex (one grammar per request)", "both"
        )
    if tool_choice.mode == "required":
        raise InvalidRequestField(
            "/tool_choice",
            "'auto' or 'none' beside a regex (forced tool calls are a grammar of their own)",
            "forced tool calls",
        )
