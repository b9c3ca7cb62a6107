"""Text-completion requests: OpenAI's ``/v1/completions`` and SGLang's ``/generate``.

One prompt per request (a string or token ids); a batch is refused with a clear error rather
than half-served. ``/v1/completions`` keeps OpenAI's defaults (``max_tokens`` 16); ``/generate``
keeps SGLang's (``max_new_tokens`` 128) and streams cumulative text, as SGLang does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ember.models.api.chat_request import (
    INT64,
    SERVER_MAX_STOP_STRINGS,
    SamplingOptions,
    parse_sampling,
)
from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import (
    at,
    loads_checked,
    logit_bias,
    optional_bool,
    optional_int,
    optional_number,
    optional_str,
    require_object,
    shown_number,
    stop_sequences,
    token_id_list,
    wrong_type,
)
from ember.models.api.generate_params import check_sampling_keys, sglang_flag, stop_regexes
from ember.models.api.guided_fields import json_format
from ember.models.api.read_fields import narrowed
from ember.models.api.regex_fields import checked_regex, regex_field
from ember.models.api.request_options import (
    MAX_CHOICES,
    choice_count,
    given_fields,
    prompt_logprobs_field,
    stream_options,
)
from ember.models.api.server_fields import include_stop_str, refuse_unsupported, request_rid
from ember.models.api.tools import ResponseFormat, parse_response_format
from ember.models.api.vllm_fields import cache_salt, token_bans, truncate_prompt_tokens
from ember.models.constrain.automata import Automata
from ember.models.constrain.schema_check import check_schema

OPENAI_COMPLETION_MAX_TOKENS = 16
SGLANG_MAX_NEW_TOKENS = 128


@dataclass(frozen=True)
class CompletionRequest:
    """``/v1/completions``: exactly one of ``prompt`` and ``prompt_token_ids`` is set."""

    model: str | None  # None: left out (the served model)
    prompt: str | None
    prompt_token_ids: tuple[int, ...] | None
    sampling: SamplingOptions
    echo: bool = False
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False  # stream_options.continuous_usage_stats (vLLM)
    response_format: ResponseFormat = ResponseFormat()
    user: str | None = None
    prompt_logprobs: int | None = None  # vLLM's: alternatives per prompt token, as sent
    skip_special_tokens: bool = True  # SGLang's and vLLM's: special tokens stay out of text
    regex: str | None = None  # SGLang's regex / vLLM's structured_outputs.regex
    # vLLM's: a text prompt gets the tokenizer's special tokens (a BOS), as HF's encode adds
    # them; token ids are fed as sent.
    add_special_tokens: bool = True
    n: int = 1  # choices for the prompt
    include_stop_str: bool = False  # vLLM's include_stop_str_in_output, SGLang's no_stop_trim
    truncate_prompt_tokens: int | None = None  # vLLM's: feed only the last k (-1: context)
    cache_salt: str | None = None  # vLLM's: prefix-cache pages shared only under the same salt
    rid: str | None = None  # SGLang's: the engine's request id, and the answer's


@dataclass(frozen=True)
class GenerateRequest:
    """SGLang ``/generate``: exactly one of ``text`` and ``input_ids`` is set."""

    text: str | None
    input_ids: tuple[int, ...] | None
    sampling: SamplingOptions
    json_schema: Mapping | bool | None = None
    regex: str | None = None  # SGLang's sampling_params.regex: the whole output matches it
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: int = 0
    # Prompt logprobs from this prompt position on (-1: none), with return_logprob only.
    logprob_start_len: int = -1
    rid: str | None = None
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    # The prompt came as a batch (["text"], [[ids]]): SGLang then answers with a list.
    batched: bool = False
    n: int = 1  # sampling_params.n: SGLang answers n > 1 with a list, one entry per choice
    cache_salt: str | None = None  # SGLang's: prefix-cache pages shared only under the same salt
    # SGLang's: logprob entries carry the token's text only when asked (else null).
    return_text_in_logprobs: bool = False


def _is_zero(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


def _token_ids(value: list, path: str) -> tuple[int, ...]:
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise wrong_type(at(path, i), "a token id (a non-negative integer)", item)
    return tuple(value)


def _one_prompt(value: object, path: str) -> tuple[str | None, tuple[int, ...] | None]:
    """A string, ``[string]``, token ids, or ``[[token ids]]``; several prompts are refused."""
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list) or not value:
        raise wrong_type(path, "a string or an array of token ids", value)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None, _token_ids(value, path)
    if len(value) != 1:
        raise InvalidRequestField(
            path,
            "one prompt per request (send a batch as separate requests)",
            f"{len(value)} prompts",
            "unsupported_value",
        )
    inner = value[0]
    if isinstance(inner, str):
        return inner, None
    if isinstance(inner, list) and inner:
        return None, _token_ids(inner, at(path, 0))
    raise wrong_type(at(path, 0), "a string or an array of token ids", inner)


def parse_completion_request(body: object) -> CompletionRequest:
    data = require_object(body, "/")
    model = optional_str(data, "model", "")  # None: the served model (as SGLang, vLLM)
    if data.get("prompt") is None:
        raise InvalidRequestField("/prompt", "a prompt", "nothing", "missing_required_parameter")
    prompt, token_ids = _one_prompt(data["prompt"], "/prompt")
    n = choice_count(data, "")
    best_of = optional_int(data, "best_of", "", minimum=1, default=n)
    if best_of != n:
        # vLLM's V1 engine dropped best_of too; ranking n of best_of by cumulative logprob is
        # left to the client (ask n choices with logprobs).
        raise InvalidRequestField(
            "/best_of",
            f"null or equal to n ({n}): candidates are not ranked here; ask for n choices "
            "with logprobs and rank them",
            shown_number(data["best_of"]),
            "unsupported_value",
        )
    if data.get("suffix") is not None:
        raise InvalidRequestField(
            "/suffix", "null (suffix insertion is not supported)", "a string", "unsupported_value"
        )
    # OpenAI caps it at 5; vLLM at its max_logprobs (20 by default), as ember's top_logprobs.
    top = optional_int(data, "logprobs", "", minimum=0, maximum=20)
    echo = optional_bool(data, "echo", "", False)
    chat_style = narrowed(data, ("logprobs", "top_logprobs"))
    # Left out: OpenAI's legacy 16. An explicit null: the rest of the context window, as vLLM
    # (CompletionRequest.max_tokens defaults to 16, but a null stays None and get_max_tokens
    # then takes max_model_len - prompt, capped by generation_config's max_new_tokens).
    chat_style.setdefault("max_tokens", OPENAI_COMPLETION_MAX_TOKENS)
    # max_tokens 0 with echo is a prompt-only pass (OpenAI's and vLLM's way of scoring a
    # prompt: the echoed text and, with logprobs, the prompt's logprobs); without echo it
    # would answer nothing, and vLLM refuses it.
    prompt_only = _is_zero(chat_style["max_tokens"])
    if prompt_only:
        if not echo:
            raise InvalidRequestField(
                "/max_tokens",
                "an integer >= 1 (0 only with echo: true, a prompt-only pass)",
                shown_number(data["max_tokens"]),
            )
        chat_style["max_tokens"] = 1  # validated as any other request, then made 0
    # Only the model server takes text completions: no temperature cap, as SGLang and vLLM.
    sampling = replace(
        parse_sampling(
            chat_style,
            max_temperature=None,
            max_repetition_penalty=None,
            max_stop=SERVER_MAX_STOP_STRINGS,
        ),
        logprobs=top is not None,
        top_logprobs=top or 0,
        given=given_fields(data, ("max_tokens",)),  # OpenAI's 16 is the route's, not sent
        **token_bans(data),
    )
    if prompt_only:
        sampling = replace(sampling, max_tokens=0)
    stream = optional_bool(data, "stream", "", False)
    # vLLM's prompt_logprobs; echo with logprobs scores the echoed prompt too (OpenAI, vLLM;
    # lm-eval-harness reads token_logprobs of the prompt's tokens this way).
    prompt_logprobs = prompt_logprobs_field(data, stream)
    wanted = [n for n in (prompt_logprobs, top if echo else None) if n is not None]
    if wanted:
        sampling = replace(sampling, prompt_logprobs=max(wanted), prompt_logprobs_start=1)
    include_usage, continuous_usage = stream_options(data, stream)
    budget = Automata()  # one for the request's schemas (automata.py)
    response_format = parse_response_format(data.get("response_format"), "/response_format", budget)
    response_format = json_format(data, "", response_format, budget)  # vLLM's guided_json too
    regex = regex_field(data, automata=budget)
    refuse_unsupported(data)
    if regex is not None and response_format.type != "text":
        raise InvalidRequestField(
            "/response_format", "no JSON format beside a regex (one grammar per request)", "both"
        )
    return CompletionRequest(
        model=model,
        prompt=prompt,
        prompt_token_ids=token_ids,
        sampling=sampling,
        echo=echo,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        response_format=response_format,
        user=optional_str(data, "user", ""),
        prompt_logprobs=prompt_logprobs,
        skip_special_tokens=optional_bool(data, "skip_special_tokens", "", True),
        regex=regex,
        add_special_tokens=optional_bool(data, "add_special_tokens", "", True),
        n=n,
        include_stop_str=include_stop_str(data),
        truncate_prompt_tokens=truncate_prompt_tokens(data),
        cache_salt=cache_salt(data),
        rid=request_rid(data),
    )


def _generate_sampling(
    params: Mapping, path: str
) -> tuple[SamplingOptions, Mapping | bool | None, str | None]:
    """The sampling options, the ``json_schema`` and the ``regex``: both compiled within one
    budget with the stop regexes (automata.py)."""
    check_sampling_keys(params, path)  # SGLang's names only, each honoured or refused
    if params.get("regex") is not None and params.get("json_schema") is not None:
        # SGLang's SamplingParams.verify: one grammar per request.
        raise InvalidRequestField(
            at(path, "regex"), "only one of json_schema and regex", "both", "unsupported_value"
        )
    schema: Mapping | bool | None = None
    budget = Automata()  # one for the json_schema or regex, and the stop regexes (automata.py)
    raw_schema = params.get("json_schema")
    if raw_schema is not None:
        where = at(path, "json_schema")
        if not isinstance(raw_schema, str):
            raise wrong_type(where, "a JSON schema encoded as a string", raw_schema)
        try:
            schema = loads_checked(raw_schema, where)
        except ValueError:
            raise InvalidRequestField(
                where, "a JSON schema encoded as a string", "text that is not JSON"
            ) from None
        check_schema(schema, path=where, budget=budget)
    regex = params.get("regex")
    if regex is not None:
        regex = checked_regex(regex, at(path, "regex"), budget)
    top_k = optional_int(params, "top_k", path, minimum=-1)
    if top_k == 0:
        raise InvalidRequestField(at(path, "top_k"), "-1 (off) or an integer >= 1", "0")
    seed = optional_int(params, "sampling_seed", path, minimum=-INT64, maximum=2 * INT64 - 1)
    if seed is None:
        seed = optional_int(params, "seed", path, minimum=-INT64, maximum=2 * INT64 - 1)
    # The ranges are the engine's (SamplingParams), checked here so that errors name SGLang's
    # fields. max_new_tokens 0 is a prompt-only pass, as in SGLang (scoring: with
    # return_logprob and logprob_start_len, the prompt's logprobs and no output).
    # Left out, it stays None: the route takes SGLang's default (128) clipped to the context.
    max_new = optional_int(params, "max_new_tokens", path, minimum=0)
    min_new = optional_int(params, "min_new_tokens", path, minimum=0, default=0) or 0
    if min_new > (SGLANG_MAX_NEW_TOKENS if max_new is None else max_new):
        raise InvalidRequestField(
            at(path, "min_new_tokens"),
            f"at most max_new_tokens ({SGLANG_MAX_NEW_TOKENS if max_new is None else max_new})",
            shown_number(params["min_new_tokens"]),
        )
    sampling = SamplingOptions(
        max_tokens=max_new,
        min_tokens=min_new,
        # SGLang's verify(): a non-negative finite number, no upper bound.
        temperature=optional_number(params, "temperature", path, minimum=0, default=1.0),  # type: ignore[arg-type]
        # 0 is taken as on the OpenAI routes (only the most likely token), not refused as
        # SGLang does: Workers AI's schema allows it, and one rule holds on every route.
        top_p=optional_number(params, "top_p", path, minimum=0, maximum=1, default=1.0),  # type: ignore[arg-type]
        top_k=top_k if top_k and top_k > 0 else None,
        min_p=optional_number(params, "min_p", path, minimum=0, maximum=1, default=0.0),  # type: ignore[arg-type]
        seed=seed,
        stop=stop_sequences(params, "stop", path, most=SERVER_MAX_STOP_STRINGS, allow_empty=True),
        stop_regex=stop_regexes(params, path, SERVER_MAX_STOP_STRINGS, budget),
        stop_token_ids=token_id_list(params, "stop_token_ids", path, skip_nulls=True),
        frequency_penalty=optional_number(
            params, "frequency_penalty", path, minimum=-2, maximum=2, default=0.0
        ),  # type: ignore[arg-type]
        presence_penalty=optional_number(
            params, "presence_penalty", path, minimum=-2, maximum=2, default=0.0
        ),  # type: ignore[arg-type]
        repetition_penalty=optional_number(  # SGLang's: any value > 0
            params, "repetition_penalty", path, minimum=0, default=1.0, exclusive_minimum=True
        ),  # type: ignore[arg-type]
        ignore_eos=sglang_flag(params, "ignore_eos", path, False),
        logit_bias=logit_bias(params, path),  # SGLang's SamplingParams.logit_bias
        given=given_fields(params, ("max_new_tokens",)),
    )
    return sampling, schema, regex


def parse_generate_request(body: object) -> GenerateRequest:
    data = require_object(body, "/")
    has_text, has_ids = data.get("text") is not None, data.get("input_ids") is not None
    if has_text == has_ids:
        # The error names a field, as every other 400 does: the one to send when neither came,
        # the one to drop when both did (SGLang's own ValueError names neither).
        raise InvalidRequestField(
            "/input_ids" if has_text else "/text",
            "exactly one of 'text' or 'input_ids'",
            "both" if has_text else "neither",
            "invalid_value" if has_text else "missing_required_parameter",
        )
    if has_text:
        text, ids = _one_prompt(data["text"], "/text")
        if ids is not None:
            raise wrong_type("/text", "a string", data["text"])
        batched = isinstance(data["text"], list)
    else:
        text, ids = _one_prompt(data["input_ids"], "/input_ids")
        if text is not None:
            raise wrong_type("/input_ids", "an array of token ids", data["input_ids"])
        batched = isinstance(data["input_ids"][0], list)
    params = data.get("sampling_params")
    if isinstance(params, list):
        if len(params) != 1:
            raise InvalidRequestField(
                "/sampling_params",
                "one set of sampling params",
                f"{len(params)} sets",
                "unsupported_value",
            )
        params = params[0]
    params = require_object(params if params is not None else {}, "/sampling_params")
    refuse_unsupported(data, "", ("lora_path", "return_hidden_states"))
    sampling, schema, regex = _generate_sampling(params, "/sampling_params")
    n = optional_int(params, "n", "/sampling_params", minimum=1, maximum=MAX_CHOICES, default=1)
    return_logprob = optional_bool(data, "return_logprob", "", False)
    top_n = optional_int(data, "top_logprobs_num", "", minimum=0, maximum=20, default=0) or 0
    top_n = top_n if return_logprob else 0  # as SGLang: no logprobs of any kind without it
    asked_start = optional_int(data, "logprob_start_len", "", minimum=-1, default=-1)
    start = asked_start if return_logprob and asked_start is not None else -1
    # SGLang reports the logprobs of the distribution it samples from (after logit_bias,
    # penalties and temperature) unless SGLANG_RETURN_ORIGINAL_LOGPROB is set.
    sampling = replace(
        sampling, logprobs=return_logprob, top_logprobs=top_n, logprobs_mode="processed"
    )
    if start >= 0:
        # SGLang's input_token_logprobs: prompt tokens from logprob_start_len on, the first of
        # them null (SGLang scores from the row at that position, which predicts the next).
        sampling = replace(sampling, prompt_logprobs=top_n, prompt_logprobs_start=start + 1)
    return GenerateRequest(
        text=text,
        input_ids=ids,
        sampling=sampling,
        json_schema=schema,
        regex=regex,
        stream=optional_bool(data, "stream", "", False),
        return_logprob=return_logprob,
        top_logprobs_num=top_n,
        logprob_start_len=start,
        rid=optional_str(data, "rid", ""),
        skip_special_tokens=sglang_flag(params, "skip_special_tokens", "/sampling_params", True),
        no_stop_trim=sglang_flag(params, "no_stop_trim", "/sampling_params", False),
        batched=batched,
        n=n or 1,
        cache_salt=cache_salt(data, empty_is_none=True),
        return_text_in_logprobs=optional_bool(data, "return_text_in_logprobs", "", False),
    )
