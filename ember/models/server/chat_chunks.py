"""The ``chat.completion.chunk`` objects of one streamed chat answer, every choice's.

``ChatChunker`` is driven by its caller, one engine event at a time, rather than wrapping the
event stream in another async generator: a stream's per-token path is the model server's
hottest Python, and each generator layer costs every token of every stream a resumption.
``stream_chat`` is the one generator between the engine's event stream and the response (the
caller's ``encode`` turns each batch into what it sends): a one-choice request (nearly all)
reads the engine's stream directly; ``n`` choices go through ``choices.stream_choices``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TypeVar

from ember.errors import EmberError
from ember.models.api.chat_request import ChatRequest
from ember.models.api.responses import ChatStream, TokenLogprob, Usage, now
from ember.models.server.choices import choice_inputs, stream_choices
from ember.models.server.generation import GenerationEvent, LogprobRecord, stream_generation
from ember.models.server.inputs import ChatInput, ChoiceReader
from ember.models.server.loading import ServedModel
from ember.models.server.metrics import ServerMetrics
from ember.models.server.wire import stream_error_payload

T = TypeVar("T")
TokenLogprobs = Callable[[ServedModel, list[LogprobRecord]], list[TokenLogprob]]


def choices_usage(
    prompt_tokens: int,
    latest: Sequence[GenerationEvent | None],
    readers: Sequence[ChoiceReader] = (),
) -> Usage:
    """The request's usage from each choice's latest event: the prompt counted once (its cached
    tokens are those choice 0 found in the prefix cache; the other choices reuse choice 0's
    pages), the completion tokens summed over the choices, as vLLM and OpenAI count them."""
    first = latest[0] if latest else None
    completion = sum(event.completion_tokens for event in latest if event is not None)
    counts = [reader.thinking.count if reader.thinking is not None else None for reader in readers]
    reasoning = None if not counts or None in counts else sum(c for c in counts if c is not None)
    cached = first.cached_tokens if first is not None else 0
    return Usage(prompt_tokens, completion, cached, reasoning)


def choice_usage(
    prompt_tokens: int,
    latest: Sequence[GenerationEvent | None],
    index: int,
    readers: Sequence[ChoiceReader] = (),
    cached: int = 0,
) -> Usage:
    """vLLM's ``continuous_usage_stats`` on a chunk of choice ``index``: the prompt and that
    choice's completion tokens so far (vLLM's ``previous_num_tokens[i]``), not the sum over
    the choices, which only the final usage chunk reports. ``cached``: the prompt's cached
    tokens while choice 0 has no event in ``latest`` yet (chunks sent with its first event,
    before that event is recorded)."""
    event = latest[index]
    reader = readers[index] if index < len(readers) else None
    thinking = reader.thinking if reader is not None else None
    reasoning = thinking.count if thinking is not None else None
    if latest[0] is not None:
        cached = latest[0].cached_tokens
    completion = event.completion_tokens if event is not None else 0
    return Usage(prompt_tokens, completion, cached, reasoning)


class ChatChunker:
    """``start()`` once, ``step(index, event)`` per engine event, ``end()`` after the last:
    each returns the chunks to send (one list per engine step, one write)."""

    def __init__(
        self,
        served: ServedModel,
        chat: ChatRequest,
        chat_in: ChatInput,
        token_logprobs: TokenLogprobs,
    ) -> None:
        self._served = served
        self._readers = chat_in.readers
        self._token_logprobs = token_logprobs if chat.sampling.logprobs else None
        self._include_usage = chat.include_usage
        self._continuous = chat.include_usage and chat.continuous_usage
        self._prompt_tokens = len(chat_in.generation.prompt_ids)
        created = now()
        self.streams = [
            ChatStream(
                id=chat_in.response_id or chat_in.generation.request_id,
                created=created,
                model=served.name,
                parser=reader.parser,
                include_usage=chat.include_usage,
                continuous_usage=chat.continuous_usage,
                index=index,
                named_tool=chat.tool_choice.named,
            )
            for index, reader in enumerate(chat_in.readers)
        ]
        self._latest: list[GenerationEvent | None] = [None] * len(self.streams)
        self._held = False  # the role chunks wait for the first event (continuous usage)

    def usage(self) -> Usage:
        return choices_usage(self._prompt_tokens, self._latest, self._readers)

    def start(self) -> list[dict]:
        """The role chunks; with continuous usage none yet: they go out with the first event
        (choice 0's, ``choices.py`` sends the others in after it), which brings the prompt's
        cached tokens, as vLLM sends its role chunk with the first engine result."""
        if self._continuous:
            self._held = True
            return []
        return self._starts(0)

    def _starts(self, cached: int) -> list[dict]:
        for stream in self.streams:
            stream.usage = Usage(self._prompt_tokens, 0, cached)
        return [stream.start() for stream in self.streams]

    def step(self, index: int, event: GenerationEvent) -> list[dict]:
        starts: list[dict] = []
        if self._held:
            self._held = False
            starts = self._starts(event.cached_tokens)
        stream, thinking = self.streams[index], self._readers[index].thinking
        if thinking is not None:
            thinking.feed(event.token_ids)
        self._latest[index] = event
        if self._continuous:  # vLLM's continuous_usage_stats: every chunk has the counts
            stream.usage = choice_usage(self._prompt_tokens, self._latest, index, self._readers)
        logprobs = None
        if self._token_logprobs is not None:
            logprobs = self._token_logprobs(self._served, event.logprobs)
        chunks = stream.text(event.text, logprobs)
        if event.finished:
            chunks += stream.finish(
                event.finish_reason or "stop", None, event.matched_stop, event.stop_reason
            )
        return starts + chunks if starts else chunks

    def end(self) -> list[dict]:
        """The usage chunk, once for the whole answer after every choice, when asked for."""
        if not self._include_usage:
            return []
        starts = self._starts(0) if self._held else []  # no event came: none held back
        self._held = False
        return [*starts, self.streams[0].usage_chunk(self.usage())]


async def stream_chat(
    served: ServedModel,
    metrics: ServerMetrics,
    chat: ChatRequest,
    chat_in: ChatInput,
    token_logprobs: TokenLogprobs,
    encode: Callable[[list[dict]], T],
    tail: T | None = None,
) -> AsyncIterator[T]:
    """The streamed answer as ``encode``d batches of chunks (one per engine step), then
    ``tail``; a failure midway is a last ``{"error"}`` payload. Closing it aborts the request
    in the engine (every choice)."""
    chunker = ChatChunker(served, chat, chat_in, token_logprobs)
    start = chunker.start()
    if start:
        yield encode(start)
    try:
        if chat.n == 1:
            events = stream_generation(served, metrics, chat_in.generation)
            try:
                async for event in events:
                    chunks = chunker.step(0, event)
                    if chunks:
                        yield encode(chunks)
            finally:
                await events.aclose()
                ticket = chat_in.generation.ticket
                if ticket is not None:
                    ticket.close()  # as stream_choices closes it: the answer ended
        else:
            items = stream_choices(served, metrics, choice_inputs(chat_in.generation, chat.n))
            try:
                async for item in items:
                    chunks = chunker.step(item.index, item.event)
                    if chunks:
                        yield encode(chunks)
            finally:
                await items.aclose()
        end = chunker.end()
        if end:
            yield encode(end)
    except EmberError as error:
        yield encode([stream_error_payload(error)])
    if tail is not None:
        yield tail
