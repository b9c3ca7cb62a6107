"""A streamed AI answer: a replica's events translated into the caller's event format.

``translate`` feeds a pooled stream through the dialect's ``StreamTranslator`` (Workers AI's
joining each tool call's pieces first: ``whole_tool_calls.py``), turns a failure
mid-stream into one error event, tells the dev console when thinking ate the whole budget (the
note a whole answer gets, ``thinking.py``), and when the stream ends (any outcome) closes the
replica's stream and frees the quota; a complete, error-free answer goes to ``store`` for the
cache.
``AnswerStream`` makes sure all of that happens on ``aclose`` even if nobody read a byte.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ember.bindings.ai.answer import AIRequestFailed
from ember.bindings.ai.classic import ClassicStream
from ember.bindings.ai.dialects import StreamTranslator, openai_error_event, workers_error_event
from ember.bindings.ai.failures import Failure, failure_of
from ember.bindings.ai.named_tool import named_tool_chunk
from ember.bindings.ai.neurons import StreamMeter
from ember.bindings.ai.raw_prompt import as_chat_chunk
from ember.bindings.ai.whole_tool_calls import WholeToolCalls
from ember.models.api.chat_request import Dialect
from ember.models.pool.errors import InvalidEvent
from ember.models.pool.pooled_stream import PooledStream

Translator = StreamTranslator | WholeToolCalls | ClassicStream


async def translate(
    events: PooledStream,
    model: str,
    dialect: Dialect,
    release: Callable[[], None],
    store: Callable[[bytes], None] | None,
    json_inputs: Mapping[str, Any] | None,
    raw: bool = False,
    thinking_ate_answer: Callable[[], None] | None = None,
    classic: bool = False,
    named_tool: bool = False,
    meter: StreamMeter | None = None,
) -> AsyncIterator[bytes]:
    """The caller's event stream; quota released and the answer stored when it ends;
    ``thinking_ate_answer`` called when the budget ran out inside the reasoning; ``classic``:
    the Workers AI classic events (``classic.py``) in place of chat chunks; ``named_tool``: the
    request named its function, so a ``tool_calls`` finish is said ``stop`` (``named_tool.py``);
    ``meter``: reads the replica's usage for the account's neurons (``neurons.py``), which the
    caller sees only if it asked for it."""
    translator: Translator = ClassicStream()
    if not classic:
        hide = meter is not None and meter.hide_usage
        translator = StreamTranslator(dialect, model, events.renamed, json_inputs, hide)
        if dialect == "workers":  # the platform sends each tool call whole
            translator = WholeToolCalls(translator)
    recorded: list[bytes] | None = [] if store is not None else None
    try:
        while not translator.done:
            batch = await events.next_batch()
            if not batch:
                break
            if meter is not None:
                for data in batch:
                    meter.feed(data)
            out, broken = _translated(batch, translator, raw, named_tool)
            if out:
                if recorded is not None:
                    recorded.append(out)
                yield out
            if broken is not None:
                raise broken
        if thinking_ate_answer is not None and translator.thinking_ate_answer:
            thinking_ate_answer()
        tail = translator.end()
        if tail:
            if recorded is not None:
                recorded.append(tail)
            yield tail
    except AIRequestFailed as exc:
        recorded = None
        yield error_event(dialect, exc.failure)
    except InvalidEvent as exc:  # a translator could not parse it: the replica's fault
        recorded = None
        yield error_event(dialect, failure_of(events.invalid_event(exc.data), model))
    except Exception as exc:
        recorded = None
        yield error_event(dialect, failure_of(exc, model))
    finally:
        await events.aclose()
        release()
        if meter is not None:
            meter.end()
    if recorded is not None and store is not None:
        content = b"".join(recorded)
        if b'"errors":' not in content:
            store(content)


class AnswerStream:
    """A streamed answer that frees everything on ``aclose``, even if it was never read.

    (An async generator that never started runs no ``finally``: closing it would leave the
    replica generating and the slot and quota taken.)
    """

    def __init__(
        self, chunks: AsyncIterator[bytes], events: PooledStream, release: Callable[[], None]
    ) -> None:
        self._chunks = chunks
        self._events = events
        self._release = release

    def __aiter__(self) -> AnswerStream:
        return self

    async def __anext__(self) -> bytes:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._chunks.aclose()  # type: ignore[attr-defined]
        await self._events.aclose()
        self._release()


def _translated(
    batch: list[str], translator: Translator, raw: bool, named_tool: bool
) -> tuple[bytes, InvalidEvent | None]:
    """A batch's bytes for the caller, up to an event that does not parse (returned with
    them: the events before it still go out, then the stream ends with the error event)."""
    out = []
    for data in batch:
        try:
            if raw:  # completion chunks -> the chat chunks the model's schema promises
                data = as_chat_chunk(data)
            if named_tool:
                data = named_tool_chunk(data)
            out.append(translator.feed(data))
        except InvalidEvent as exc:
            return b"".join(out), exc
    return b"".join(out), None


def error_event(dialect: Dialect, failure: Failure) -> bytes:
    """A failure mid-stream, as the caller's dialect reports one."""
    if dialect == "workers":
        return workers_error_event(failure.code, failure.description)
    return openai_error_event(failure.code, failure.message)
