"""Tokenization endpoints, where vLLM and SGLang serve them.

    POST /tokenize       vLLM's: ``{count, max_model_len, tokens, token_strs}``
    POST /detokenize     vLLM's: ``{prompt}``
    POST /v1/tokenize    SGLang's: ``{tokens, count, max_model_len}`` (lists for a batch)
    POST /v1/detokenize  SGLang's: ``{text}`` (a list for a batch)

The chat form is rendered and encoded by the very code ``/v1/chat/completions`` uses
(``encode_chat`` with the request's tools and ``chat_template_kwargs``), so its ids are the ones
the engine would be fed. The completion form is the plain tokenizer, special tokens added as HF's
``add_special_tokens`` adds them. SGLang also answers ``/tokenize`` and ``/detokenize``; the
request shapes are one superset (SGLang's batches are taken there too), and so is ``/tokenize``'s
answer. ``/detokenize`` answers differ by name (vLLM's ``prompt``, SGLang's ``text``): a single
list is answered with both, so either project's client reads its own; a batch (only SGLang
sends one) with SGLang's ``text``.

Token ids past the vocabulary are a 400 naming the field (``tokens.[3]``). No context window is
checked (vLLM's ``/tokenize`` counts any length); a large request is tokenized off the event loop
(``prompt_intake.taken_in``), so counting megabytes does not stop the server's streams.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ember.models.api.tokenize_request import (
    DetokenizeRequest,
    TokenizeRequest,
    out_of_vocabulary,
    parse_detokenize_request,
    parse_tokenize_request,
)
from ember.models.chat_encode import encode_chat
from ember.models.server.loading import ServedModel
from ember.models.server.prompt_intake import taken_in
from ember.models.server.state import ServerState
from ember.models.server.wire import read_json, read_json_sized


def _state(request: Request) -> ServerState:
    return request.app.state.ember


async def _tokenized(request: Request) -> tuple[ServedModel, TokenizeRequest, list[list[int]]]:
    """The request and its ids; a large one is tokenized off the event loop (``taken_in``)."""
    state = _state(request)
    served = state.ready()
    body, size = await read_json_sized(request)
    parsed = parse_tokenize_request(body)
    state.check_model(served, parsed.model)
    lists = await taken_in(served, None, size, lambda: token_ids(served, parsed))
    return served, parsed, lists


def token_ids(served: ServedModel, parsed: TokenizeRequest) -> list[list[int]]:
    """The ids of each prompt (one list for the chat form)."""
    tokenizer = served.tokenizer
    if parsed.chat is not None:
        chat = parsed.chat
        lists = [
            encode_chat(
                tokenizer,
                chat.template_messages(),
                tools=chat.template_tools(),
                add_generation_prompt=parsed.add_generation_prompt,
                continue_final_message=parsed.continue_final_message,
                chat_template_kwargs=chat.template_arguments(),
            )
        ]
    else:
        assert parsed.prompts is not None
        lists = [tokenizer.encode(prompt) for prompt in parsed.prompts]
    if parsed.add_special_tokens:
        lists = [tokenizer.with_special_tokens(ids) for ids in lists]
    return lists


async def tokenize(request: Request) -> Response:
    """vLLM's ``/tokenize`` (SGLang's batch of prompts answered with lists)."""
    served, parsed, lists = await _tokenized(request)
    if parsed.batched:
        return JSONResponse(_sglang_tokenized(served, lists, batched=True))
    (ids,) = lists
    strings = served.tokenizer.token_strings(ids) if parsed.return_token_strs else None
    return JSONResponse(
        {
            "count": len(ids),
            "max_model_len": served.context_length,
            "tokens": ids,
            "token_strs": strings,
        }
    )


async def sglang_tokenize(request: Request) -> Response:
    served, parsed, lists = await _tokenized(request)
    return JSONResponse(_sglang_tokenized(served, lists, batched=parsed.batched))


def _sglang_tokenized(served: ServedModel, lists: list[list[int]], *, batched: bool) -> dict:
    if batched:
        tokens: object = lists
        count: object = [len(ids) for ids in lists]
    else:
        tokens, count = lists[0], len(lists[0])
    return {"tokens": tokens, "count": count, "max_model_len": served.context_length}


async def _detokenized(request: Request, skip_default: bool) -> tuple[DetokenizeRequest, list]:
    state = _state(request)
    served = state.ready()
    parsed = parse_detokenize_request(await read_json(request))
    state.check_model(served, parsed.model)
    tokenizer = served.tokenizer
    error = out_of_vocabulary(parsed, tokenizer.vocab_size)
    if error is not None:
        raise error
    skip = skip_default if parsed.skip_special_tokens is None else parsed.skip_special_tokens
    texts = [tokenizer.decode(ids, skip_special_tokens=skip) for ids in parsed.token_lists]
    return parsed, texts


async def detokenize(request: Request) -> Response:
    """vLLM's ``/detokenize`` (special tokens kept, as vLLM decodes), SGLang's batches too."""
    parsed, texts = await _detokenized(request, skip_default=False)
    if parsed.batched:
        return JSONResponse({"text": texts})
    return JSONResponse({"prompt": texts[0], "text": texts[0]})


async def sglang_detokenize(request: Request) -> Response:
    """SGLang's ``/v1/detokenize`` (``skip_special_tokens`` on unless sent false)."""
    parsed, texts = await _detokenized(request, skip_default=True)
    return JSONResponse({"text": texts if parsed.batched else texts[0]})
