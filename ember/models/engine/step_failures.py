"""What a step's failures do to their requests: KV that failed its integrity check, and rows the
sampler could not sample. Each ends or recomputes only its own request; the batch goes on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.errors import KVIntegrityError
from ember.models.engine.runner_types import StepResult
from ember.models.engine.scheduler import SchedulerOutput
from ember.models.engine.sequence import FinishReason, SequenceStatus

if TYPE_CHECKING:
    from ember.models.engine.llm_engine import LLMEngine


def handle_step_failures(engine: LLMEngine, out: SchedulerOutput, result: StepResult) -> None:
    """Apply ``result``'s failures before the step's tokens are kept (``_postprocess`` skips
    every sequence that is no longer running)."""
    _integrity_failures(engine, out, result)
    for index, error in result.sample_failures:
        seq = out.scheduled[index].seq
        if seq.status is SequenceStatus.RUNNING:
            # One request's sampling failed (its grammar cannot go on): it ends with the error;
            # the batch, and the engine loop, go on without it.
            engine.scheduler.finish(seq, FinishReason.ERROR, error)


def _integrity_failures(engine: LLMEngine, out: SchedulerOutput, result: StepResult) -> None:
    """Sequences that read bad KV drop this step's token and recompute (or fail)."""
    for failure in result.failures:
        seq = out.scheduled[failure.seq_index].seq
        if seq.status is not SequenceStatus.RUNNING:
            continue  # already preempted as a holder of a corrupt page
        engine.stats.integrity_failures += 1
        for page in failure.corrupt_pages:
            engine.block_manager.invalidate(page)
            for other in list(engine.scheduler.running):
                if other is not seq and page in other.block_table:
                    engine.scheduler.preempt(other)
        seq.num_integrity_failures += 1
        if seq.num_integrity_failures > engine.config.max_integrity_retries:
            engine.stats.integrity_errors += 1
            error = KVIntegrityError(
                f"request {seq.request_id!r}: KV cache failed its integrity check "
                f"{seq.num_integrity_failures} times ({failure.detail})"
            )
            engine.scheduler.finish(seq, FinishReason.ERROR, error, disowned=failure.disowned_pages)
        else:
            engine.scheduler.preempt(seq, disowned=failure.disowned_pages)
