"""Several choices for one prompt (``n``): one engine sequence per choice, the prompt prefilled
once.

As vLLM's parallel sampling (a parent request fanned out into ``n`` child requests) and SGLang's
request expansion, each choice is an ordinary engine request: the scheduler's admission, its
``max_running_requests`` and its KV reservation all see ``n`` sequences, each choice has its own
grammar (a constrained request constrains every choice) and its own finish.

Choice 0 goes in first; the others follow when its first event is back, i.e. once its prefill
is done and the prompt's full pages are registered in the prefix cache, so that they take those
pages instead of computing the prompt again (SGLang likewise caches the prefix before it expands
a request; submitted together, all ``n`` would be admitted in one step, before any page of the
prompt was cached, and each would compute all of it). Only the prompt's last, partial page is
computed per choice.

With a ``seed``, choice ``i`` samples with ``seed + i`` (vLLM's rule): the whole answer is
reproducible, and its choices still differ. Leaving ``stream_choices`` early (the client went
away, a choice failed) aborts every choice still running; so does an abort of the request
(``/abort_request`` with its rid or its answer's id, or ``abort_all``), which reaches choice 0
by its engine id, the request's own. An abort of choice 0 alone (SGLang's ``<rid>_0``) ends
it alone, as the ticket tells. An abort of one choice's id (``<id>-<i>``) that comes before
that choice went in ends it there (``answer_ids.py``: each choice checks its request's ticket
right before its submission).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from ember.models.api.errors import InvalidRequestField
from ember.models.server.generation import GenerationEvent, GenerationInput, stream_generation
from ember.models.server.loading import ServedModel
from ember.models.server.metrics import ServerMetrics

_SEED_WRAP = 2**64  # SamplingParams takes seeds up to 2**64 - 1: seed + i wraps past it


@dataclass(frozen=True, slots=True)
class ChoiceEvent:
    """One engine step's output for choice ``index``."""

    index: int
    event: GenerationEvent


def choice_inputs(generation: GenerationInput, n: int) -> list[GenerationInput]:
    """The engine requests for ``n`` choices of ``generation``. Choice 0 is ``generation``
    itself (the id the route announced to the engine); choice ``i`` is ``<id>-<i>``, seeded
    ``seed + i``, without prompt logprobs (choice 0 computes them once for all)."""
    out = [generation]
    params = generation.params
    for index in range(1, n):
        seed = params.seed
        if seed is not None:
            seed = seed + index if seed + index < _SEED_WRAP else seed + index - _SEED_WRAP
        out.append(
            replace(
                generation,
                request_id=f"{generation.request_id}-{index}",
                choice=index,
                params=replace(params, seed=seed, prompt_logprobs=None),
            )
        )
    return out


def check_choices_fit(
    served: ServedModel, generation: GenerationInput, n: int, asked: int | None, field: str = "/n"
) -> None:
    """Refuse (400 naming ``n``) ``n`` choices that could never be in the KV cache together:
    the prompt's shared full pages plus each choice's own pages for the rest of the prompt and
    ``asked`` output tokens (the request's max_tokens; one token when it asked for none, the
    context window being a bound rather than a need). Without this check such a request would
    run its choices by preempting one another, recomputing them over and over."""
    if n == 1:
        return
    size = served.kv.page_size
    pool = served.llm.block_manager.num_pages
    prompt = len(generation.prompt_ids)
    output = max(1, asked or 1)
    shared = (prompt - 1) // size  # the pages a choice can take from the prefix cache
    own = -(-(prompt + output - 1) // size) - shared  # the last token needs no KV entry
    needed = shared + n * own
    if needed <= pool:
        return
    fits = max(0, (pool - shared) // own)
    raise InvalidRequestField(
        field,
        f"at most {fits} choices for this request: {n} choices of a {prompt}-token prompt with "
        f"up to {output} output tokens each need {needed} pages of KV cache ({size} tokens a "
        f"page, the prompt's full pages shared), and the pool holds {pool}",
        f"n = {n}",
    )


def _aborted(generation: GenerationInput) -> GenerationEvent:
    """The only event of a choice that was aborted before it went into the engine."""
    return GenerationEvent(
        "", [], [], finished=True, finish_reason="abort", prompt_tokens=len(generation.prompt_ids)
    )


async def stream_choices(
    served: ServedModel, metrics: ServerMetrics, inputs: list[GenerationInput]
) -> AsyncIterator[ChoiceEvent]:
    """The events of every choice, as they come (see the module docstring). An error in one
    choice ends them all and is raised here."""
    ticket = inputs[0].ticket
    if len(inputs) == 1:
        events = stream_generation(served, metrics, inputs[0])
        try:
            async for event in events:
                yield ChoiceEvent(0, event)
        finally:
            await events.aclose()
            if ticket is not None:
                ticket.close()  # the answer ended: /abort_request no longer finds it
        return
    queue: asyncio.Queue[tuple[int, GenerationEvent | BaseException | None]] = asyncio.Queue()
    # Choices whose first event is queued, i.e. that went into the engine: an engine abort
    # reaches them. One that has not may be before its submission, where an abort of its id
    # would be dropped (the engine holds no such request yet) and it would then run in full.
    started: set[int] = set()

    async def pump(index: int) -> None:
        try:
            async for event in stream_generation(served, metrics, inputs[index]):
                started.add(index)
                queue.put_nowait((index, event))
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # handed to the consumer, which ends every choice
            queue.put_nowait((index, error))
            return
        queue.put_nowait((index, None))

    tasks = [asyncio.create_task(pump(0))]
    remaining = len(inputs)
    never: list[int] = []  # choices ended by choice 0's abort before they reached the engine
    waiting = True  # choices 1.. are not in the engine yet
    try:
        while remaining:
            index, item = await queue.get()
            # Choice 0's engine id is the request's own, so its abort is the parent's unless
            # the ticket says only choice 0 was named (SGLang's ``R_0``, ember's id for it).
            parent_aborted = (
                isinstance(item, GenerationEvent)
                and item.finish_reason == "abort"
                and (ticket is None or ticket.aborted_whole())
            )
            if index == 0 and parent_aborted:
                # Choice 0 carries the request's own id: /abort_request with that id (or
                # abort_all) ends the whole request, as SGLang ends every child of a parent
                # rid. Choices not yet in the engine end without running.
                for other in inputs[1:]:
                    served.engine.abort(other.request_id)
                if not waiting:  # the rest were handed in: end those not in the engine yet
                    never = [i for i in range(1, len(inputs)) if i not in started]
                    for i in never:
                        tasks[i].cancel()  # cancelled before its submission, or aborted in it
            elif waiting:  # choice 0's prefill is done (or it ended): the rest go in
                tasks += [asyncio.create_task(pump(i)) for i in range(1, len(inputs))]
                waiting = False
            if item is None:
                remaining -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield ChoiceEvent(index, item)
            if index == 0 and parent_aborted:
                if waiting:
                    never = list(range(1, len(inputs)))
                    waiting = False
                for other in never:
                    yield ChoiceEvent(other, _aborted(inputs[other]))
                remaining -= len(never)
                never = []
    finally:
        for task in tasks:
            task.cancel()  # each choice's stream_generation aborts its engine request
        await asyncio.gather(*tasks, return_exceptions=True)
        if ticket is not None:
            ticket.close()
