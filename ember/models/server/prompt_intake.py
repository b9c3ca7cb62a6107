"""Taking a prompt in: a prompt that cannot fit is refused from its size, before it is tokenized,
and a large one is rendered and tokenized off the event loop.

A text of B bytes is at least ceil(B / L) tokens, L being the checkpoint's longest token in
bytes (``ember.models.token_floor``; 69 for the shipped ones). A prompt whose bound alone leaves
no room in the context window is refused with OpenAI's words ("...resulted in at least N
tokens"), naming the field, before the tokenizer spends seconds on it: 2 MB took ~3 s here, on
the event loop, while every stream the server was sending stood still. The bound is taken on
the text the tokenizer gets: the rendered chat prompt (the template adds text, and may leave
some of the request out, such as earlier turns' reasoning, so the request's own strings are no
bound), or a completion's or ``/generate``'s text. A request that truncates its prompt
(``truncate_prompt_tokens``) is never refused by it, and ``/tokenize`` checks no window at all.

A prompt that may fit is rendered and tokenized in a worker thread when its request body is
large (``taken_in``), while the loop goes on sending every other stream's tokens: the tokenizer
releases the GIL for long texts (``UNLOCKED_ENCODE_CHARS`` in tokenizer.py). Both apply from
``LARGE_PROMPT_BYTES`` on; a smaller prompt is tokenized at once, on the loop. A request that
carries a schema, a regex or tools (``carries_schemas``) is taken in off the loop whatever its
size: a 37 KB body's schemas can build an automaton budget's worth of states (about 1 CPU-s,
automata.py) while the compiler holds the GIL, and the loop still gets its turns to write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from ember.errors import ContextLengthExceeded
from ember.models.api.chat_request import ChatRequest
from ember.models.api.completion_request import CompletionRequest
from ember.models.chat_encode import encode_marked, marked_text_bytes, render_chat
from ember.models.server.loading import ServedModel
from ember.models.server.request_fields import COMPLETION_FIELDS, RequestFields
from ember.models.token_floor import at_least

T = TypeVar("T")

# From this size on a prompt costs tens of ms to tokenize (~1 us a byte here): its text is
# checked by size first, and its request (body) is rendered and tokenized off the event loop.
# A smaller one is tokenized at once, on the loop: a thread hop would cost it more than it
# saves, and a refusal then names the exact count instead of the bound's.
LARGE_PROMPT_BYTES = 64 * 1024


async def taken_in(
    served: ServedModel,
    announced: str | None,
    body_bytes: int,
    work: Callable[[], T],
    *,
    schemas: bool = False,
) -> T:
    """``work()`` (parsing a request, compiling its schemas, rendering, checking, tokenizing a
    prompt): on the loop for a small request, in a worker thread for a large one or one that
    ``schemas`` (``carries_schemas``). ``announced``: the id the route announced to the engine
    (``AsyncEngine.expect``), if any; a request taken in off the loop withdraws it, since no
    step should wait for a prompt that takes this long to take in (the route still submits it
    as usual)."""
    if body_bytes < LARGE_PROMPT_BYTES and not schemas:
        return work()
    if announced is not None:
        served.engine.forget(announced)
    return await asyncio.to_thread(work)


def check_prompt_bytes(
    served: ServedModel,
    text_bytes: int,
    asked: int | None,
    fields: RequestFields,
    *,
    added_tokens: int = 0,
) -> None:
    """Refuse a prompt whose ``text_bytes`` bytes alone (plus ``added_tokens`` special tokens
    wrapped around them) cannot fit the context window with the ``asked`` output tokens.
    Nothing is refused when the tokenizer gives no bound (``Tokenizer.max_token_bytes``), nor
    for a text below ``LARGE_PROMPT_BYTES`` (tokenized at once, it gets the exact count)."""
    longest = served.tokenizer.max_token_bytes
    if longest is None or text_bytes < LARGE_PROMPT_BYTES:
        return
    floor = at_least(text_bytes, longest) + added_tokens
    context = served.context_length
    name = fields.prompt_name
    why = (
        f"its {text_bytes} bytes of text make at least {floor} tokens (no token of this model "
        f"is longer than {longest} bytes; counted without tokenizing it)"
    )
    if floor >= context:
        raise ContextLengthExceeded(
            fields.prompt,
            f"This model's maximum context length is {context} tokens. However, your {name} "
            f"resulted in at least {floor} tokens. Please reduce the length of the {name}: "
            f"{why}; this model serves at most {context - 1} prompt tokens",
        )
    if asked is not None and floor + asked > context:
        raise ContextLengthExceeded(
            fields.max_tokens,
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"at least {floor + asked} tokens (at least {floor} in the {name}, {asked} in the "
            f"completion). Please reduce the length of the {name} or completion: "
            f"{fields.max_tokens_name} is {asked}, but the prompt leaves room for at most "
            f"{context - floor} in the {context}-token context window: {why}",
        )


def chat_prompt_ids(served: ServedModel, request: ChatRequest) -> list[int]:
    """The prompt ids of a chat request: rendered (control-token text in it stays text:
    ``encode_chat``), checked against the window by its size, then tokenized."""
    tokenizer = served.tokenizer
    text = render_chat(
        tokenizer,
        request.template_messages(),
        tools=request.template_tools(),
        add_generation_prompt=request.add_generation_prompt,
        continue_final_message=request.continue_final_message,
        chat_template_kwargs=request.template_arguments(),
    )
    added = _added_tokens(served) if request.add_special_tokens else 0
    if request.truncate_prompt_tokens is None:
        fields = RequestFields(max_tokens=f"/{request.max_tokens_field}")
        check_prompt_bytes(
            served, marked_text_bytes(text), request.sampling.max_tokens, fields, added_tokens=added
        )
    ids = encode_marked(tokenizer, text)
    if request.add_special_tokens:  # vLLM's, off by default: the template has its own
        ids = tokenizer.with_special_tokens(ids)
    return ids


def completion_prompt_ids(served: ServedModel, completion: CompletionRequest) -> list[int]:
    """The prompt ids of a ``/v1/completions`` request, its text checked by size first unless
    it is to be truncated (then any length may be sent)."""
    window = None
    if completion.truncate_prompt_tokens is None:
        window = (completion.sampling.max_tokens, COMPLETION_FIELDS)
    return prompt_ids_for(
        served,
        completion.prompt,
        completion.prompt_token_ids,
        completion.add_special_tokens,
        window=window,
    )


def prompt_ids_for(
    served: ServedModel,
    text: str | None,
    ids: tuple[int, ...] | None,
    add_special_tokens: bool = True,
    *,
    window: tuple[int | None, RequestFields] | None = None,
) -> list[int]:
    """The ids a text or token-id prompt feeds the engine. A text gets the tokenizer's special
    tokens (its post-processor's BOS, say) unless told not to, as HF's ``encode`` and so vLLM's
    completions and SGLang's ``/generate`` do; ids are fed as sent. ``/tokenize`` wraps the same
    way, so its ids, the usage's ``prompt_tokens`` and the prefix cache all see one prompt.
    ``window``: (the output tokens asked for, the request's fields) to refuse a text that
    cannot fit by its size first (``check_prompt_bytes``); None for no check."""
    if ids is not None:
        return list(ids)
    assert text is not None
    tokenizer = served.tokenizer
    if window is not None:
        added = _added_tokens(served) if add_special_tokens else 0
        asked, fields = window
        check_prompt_bytes(served, len(text.encode("utf-8")), asked, fields, added_tokens=added)
    encoded = tokenizer.encode(text)
    return tokenizer.with_special_tokens(encoded) if add_special_tokens else encoded


def _added_tokens(served: ServedModel) -> int:
    before, after = served.tokenizer.special_affixes
    return len(before) + len(after)
