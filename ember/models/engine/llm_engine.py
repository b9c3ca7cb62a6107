"""The engine loop: ``add_request`` / ``step`` / ``abort`` (schedule -> run -> postprocess).

``LLMEngine`` is single-threaded and synchronous; ``AsyncEngine`` (``async_engine.py``) runs it
in a dedicated thread for the model server. One ``step()`` is one forward over a mixed batch and
returns one ``RequestOutput`` per request that produced a token, finished or failed.
"""

from __future__ import annotations

import torch

from ember.errors import ConfigError, InvalidModelInput
from ember.models.engine.block_manager import BlockManager
from ember.models.engine.config import EngineConfig
from ember.models.engine.engine_types import (
    EngineStats,
    FlushResult,
    PreparedRequest,
    RequestOutput,
    Usage,
)
from ember.models.engine.integrity import IntegrityChecker
from ember.models.engine.logprob_types import PromptLogprobSpec
from ember.models.engine.model_runner import ModelRunner
from ember.models.engine.runner_types import CausalLM, Sampler, StepResult
from ember.models.engine.sampling import TokenLogprobs
from ember.models.engine.scheduler import Scheduler, SchedulerOutput
from ember.models.engine.sequence import FinishReason, Sequence, SequenceStatus, StopCriteria
from ember.models.engine.step_failures import handle_step_failures
from ember.models.kernels import integrity_ops
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVCacheDtype, KVSpec, kv_capacity, parse_kv_dtype
from ember.models.sampling import SamplingParams, SamplingState


class LLMEngine:
    def __init__(
        self,
        model: CausalLM,
        kv_layout: KVSpec,
        config: EngineConfig,
        *,
        model_dtype: KVCacheDtype | None = None,
        sampler: Sampler | None = None,
        eos_token_ids: frozenset[int] = frozenset(),
        vocab_size: int | None = None,
    ) -> None:
        self.config = config
        if model_dtype is None:
            model_dtype = _model_dtype(model)
        self.kv_spec = kv_layout.with_dtype(parse_kv_dtype(config.kv_cache_dtype, model_dtype))
        if config.max_total_tokens is not None:
            num_pages = config.max_total_tokens // config.page_size
        else:
            assert config.kv_cache_bytes is not None  # EngineConfig guarantees one of the two
            num_pages = kv_capacity(self.kv_spec, config.kv_cache_bytes, config.page_size).num_pages
        device = model_device(model)
        if device.type != "cpu" and config.integrity != "off":
            raise ConfigError(
                "engine",
                "integrity",
                config.integrity,
                f"off with the model on {device}: the checker stamps and reads the KV pages "
                "in host memory, so integrity checks run on CPU pools only",
            )
        self.pool = KVPool(
            self.kv_spec,
            num_pages,
            config.page_size,
            integrity=config.integrity != "off",
            device=device,
        )
        self.checker: IntegrityChecker | None = None
        if self.pool.sidecar is not None:
            self.checker = IntegrityChecker(
                self.pool.sidecar,
                config.page_size,
                config.integrity,
                config.integrity_sample_period,
                integrity_ops.load(),
            )
        self.block_manager = BlockManager(
            num_pages,
            config.page_size,
            enable_prefix_cache=config.enable_prefix_cache,
            verifier=self.checker,
        )
        self.scheduler = Scheduler(config, self.block_manager)
        if config.pack_lm_head and hasattr(model, "pack_lm_head"):
            model.pack_lm_head()  # the engine owns the model for inference from here on
        self.runner = ModelRunner(model, self.pool, checker=self.checker, sampler=sampler)
        self.eos_token_ids = eos_token_ids
        model_config = getattr(model, "config", None)
        self.vocab_size = vocab_size or getattr(model_config, "vocab_size", None)
        # The context is what the pool holds. A sequence never caches its last sampled token, so
        # capacity + 1 would decode, but a window past the pool reads as an off-by-one beside
        # --max-total-tokens, and vLLM too refuses a max_model_len its KV cannot hold.
        self.max_model_len = min(config.max_model_len, num_pages * config.page_size)
        self._sequences: dict[str, Sequence] = {}
        # Requests still collecting prompt logprobs: while none is, steps plan no such rows.
        self._num_prompt_logprob_seqs = 0
        self._next_seq_id = 0
        self.stats = EngineStats(pages_total=num_pages)

    # -- requests -----------------------------------------------------------------------------

    def prepare_request(
        self,
        prompt_token_ids: list[int],
        stop: StopCriteria | None = None,
        sampling: SamplingParams | None = None,
        *,
        prompt_logprobs: PromptLogprobSpec | None = None,
        cache_salt: str | None = None,
    ) -> PreparedRequest:
        """Validate a request and derive what the engine keeps for it; safe from any thread.

        With ``sampling`` (the request's ``SamplingParams``), ``stop`` defaults to its
        ``max_tokens`` (capped by the context window), ``stop_token_ids`` and ``ignore_eos``,
        and the request gets its own ``SamplingState`` (seeded generator, penalty counts).
        Without either, the request decodes greedily up to the context window. ``max_tokens``
        0 is a prompt-only pass: the request finishes (``length``) when its prefill is done,
        with no token (scoring a prompt with its prompt logprobs). ``prompt_logprobs``
        (default: from ``sampling.prompt_logprobs``) asks for the prompt's logprobs.
        ``cache_salt`` (vLLM's field): the request reuses prefix-cache pages only of requests
        with the same salt (``block_manager``), and no unsalted request reuses its pages.
        """
        if cache_salt is not None and not isinstance(cache_salt, str):
            raise InvalidModelInput(
                "cache_salt", f"cache_salt must be a string, got {type(cache_salt).__name__}"
            )
        if not prompt_token_ids:
            raise InvalidModelInput("prompt", "the prompt has no tokens; expected at least one")
        room = self.max_model_len - len(prompt_token_ids)
        if room < 1:
            raise InvalidModelInput(
                "prompt",
                f"the prompt has {len(prompt_token_ids)} tokens; this engine serves at most "
                f"{self.max_model_len - 1} prompt tokens (max_model_len {self.max_model_len})",
            )
        state = None
        if sampling is not None:
            vocab_size = self.vocab_size
            if vocab_size is None:
                raise ConfigError("engine", "vocab_size", None, "the model's vocabulary size")
            state = SamplingState.create(
                sampling, vocab_size, prompt_token_ids, eos_token_ids=tuple(self.eos_token_ids)
            )
            if stop is None:
                stop = StopCriteria(
                    max_tokens=room if sampling.max_tokens is None else sampling.max_tokens,
                    stop_token_ids=frozenset(sampling.stop_token_ids),
                    ignore_eos=sampling.ignore_eos,
                )
        if stop is None:
            stop = StopCriteria(max_tokens=room)
        if stop.max_tokens < 0:
            raise InvalidModelInput("max_tokens", f"max_tokens is {stop.max_tokens}; expected >= 0")
        if (
            prompt_logprobs is None
            and sampling is not None
            and sampling.prompt_logprobs is not None
        ):
            prompt_logprobs = PromptLogprobSpec(
                sampling.prompt_logprobs_start, sampling.prompt_logprobs
            )
        return PreparedRequest(list(prompt_token_ids), stop, state, prompt_logprobs, cache_salt)

    def add_request(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        stop: StopCriteria | None = None,
        sampling: SamplingParams | None = None,
        *,
        prompt_logprobs: PromptLogprobSpec | None = None,
        cache_salt: str | None = None,
    ) -> None:
        request = self.prepare_request(
            prompt_token_ids, stop, sampling, prompt_logprobs=prompt_logprobs, cache_salt=cache_salt
        )
        self.add_prepared(request_id, request)

    def add_prepared(self, request_id: str, request: PreparedRequest) -> None:
        if request_id in self._sequences:
            raise InvalidModelInput("request_id", f"request id {request_id!r} is already in use")
        seq = Sequence(
            self._next_seq_id,
            request_id,
            request.prompt_token_ids,
            request.stop,
            request.state,
            request.prompt_logprobs,
            cache_salt=request.cache_salt,
        )
        if seq.prompt_logprob_position is not None:
            self._num_prompt_logprob_seqs += 1
        self._next_seq_id += 1
        self._sequences[request_id] = seq
        self.scheduler.add(seq)

    def abort(self, request_id: str, *, reason: str = "abort") -> bool:
        """End a request now and free its pages before this returns.

        ``reason`` is ``"abort"`` (the client went away) or ``"stop"`` (the caller matched a stop
        string in the decoded text, which the engine, working on token ids, cannot see).
        """
        seq = self._sequences.get(request_id)
        if seq is None or seq.is_finished:
            return False
        self.scheduler.abort(seq, FinishReason(reason))
        return True

    def holds(self, request_id: str) -> bool:
        """Whether a request under this id is in the engine: running, waiting, or finished and
        not yet collected by a step (its id cannot be added again until then)."""
        return request_id in self._sequences

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished() or bool(self.scheduler.finished)

    def flush_cache(self) -> FlushResult:
        """Drop the prefix cache, only when no request is waiting or running (as SGLang's
        scheduler: a running request's pages are in use, and dropping the entries under it
        would only make its next turn recompute)."""
        scheduler = self.scheduler
        if scheduler.has_unfinished() or scheduler.finished:
            return FlushResult(
                False,
                "Cache not flushed because there are pending requests. "
                f"#queue-req: {len(scheduler.waiting)}, #running-req: {len(scheduler.running)}",
            )
        dropped = self.block_manager.flush()
        self.stats.cache_flushes += 1
        self.stats.prefix_cached_tokens = 0
        return FlushResult(True, "Cache flushed.", dropped)

    # -- the loop -------------------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        out = self.scheduler.schedule()
        new_tokens: dict[str, int] = {}
        new_logprobs: dict[str, TokenLogprobs] = {}
        if out.scheduled:
            new_pages = self.block_manager.stats.newly_allocated
            self.block_manager.stats.newly_allocated = []
            result = self.runner.run(
                out.scheduled, new_pages, prompt_logprobs=self._num_prompt_logprob_seqs > 0
            )
            handle_step_failures(self, out, result)
            self._postprocess(out, result, new_tokens, new_logprobs)
            self.stats.steps += 1
        self.stats.preemptions += out.num_preempted
        return self._collect(new_tokens, new_logprobs)

    def _postprocess(
        self,
        out: SchedulerOutput,
        result: StepResult,
        new_tokens: dict[str, int],
        new_logprobs: dict[str, TokenLogprobs],
    ) -> None:
        manager = self.block_manager
        logprobs = result.logprobs
        prompt_scores = result.prompt_logprobs
        for index, (entry, token) in enumerate(zip(out.scheduled, result.tokens, strict=True)):
            seq = entry.seq
            if (
                seq.status is not SequenceStatus.RUNNING
                or seq.num_computed_tokens != entry.context_len
            ):
                continue  # preempted or failed during this step
            seq.num_computed_tokens = entry.context_len + entry.num_new_tokens
            if entry.context_len < seq.num_prompt_tokens or entry.num_new_tokens > 1:
                self.stats.prompt_tokens_computed += entry.num_new_tokens
            manager.commit(seq)
            if prompt_scores is not None and (scored := prompt_scores[index]) is not None:
                seq.prompt_logprobs.extend(scored)
                if seq.prompt_logprob_position is None:  # all collected
                    self._num_prompt_logprob_seqs -= 1
            if token is None:
                continue
            if seq.stop.max_tokens == 0:  # a prompt-only pass: its prefill is all it wanted
                self.scheduler.finish(seq, FinishReason.LENGTH)
                continue
            seq.append_token(token)
            self.stats.generation_tokens += 1
            new_tokens[seq.request_id] = token
            if logprobs is not None and logprobs[index] is not None:
                new_logprobs[seq.request_id] = logprobs[index]
            reason = self._stop_reason(seq, token)
            if reason is not None:
                self.scheduler.finish(seq, reason)

    def _stop_reason(self, seq: Sequence, token: int) -> FinishReason | None:
        stop = seq.stop
        if token in stop.stop_token_ids or (not stop.ignore_eos and token in self.eos_token_ids):
            return FinishReason.STOP
        if seq.num_completion_tokens >= stop.max_tokens or seq.num_tokens >= self.max_model_len:
            return FinishReason.LENGTH
        return None

    def _collect(
        self, new_tokens: dict[str, int], new_logprobs: dict[str, TokenLogprobs]
    ) -> list[RequestOutput]:
        outputs: list[RequestOutput] = []
        finished = self.scheduler.finished
        self.scheduler.finished = []
        done = {seq.request_id for seq in finished}
        for request_id, token in new_tokens.items():
            if request_id not in done:
                seq = self._sequences[request_id]
                outputs.append(self._output(seq, (token,), new_logprobs.get(request_id)))
        for seq in finished:
            if seq.prompt_logprob_position is not None:  # ended before it collected them all
                self._num_prompt_logprob_seqs -= 1
            token = new_tokens.get(seq.request_id)
            tokens = () if token is None else (token,)
            outputs.append(self._output(seq, tokens, new_logprobs.get(seq.request_id)))
            del self._sequences[seq.request_id]
        stats = self.stats
        stats.running, stats.waiting = len(self.scheduler.running), len(self.scheduler.waiting)
        stats.waiting_tokens = sum(seq.num_tokens for seq in self.scheduler.waiting)
        stats.pages_used = stats.pages_total - self.block_manager.num_free_pages
        stats.prefix_query_tokens = self.block_manager.stats.prefix_queries
        stats.prefix_hit_tokens = self.block_manager.stats.prefix_hits
        stats.prefix_cached_tokens = self.block_manager.num_cached_pages * self.config.page_size
        if self.checker is not None:
            stats.integrity_reuse_failures = self.checker.stats.reuse_failures
            stats.integrity_cpu_seconds = self.checker.stats.cpu_seconds
        return outputs

    def _output(
        self, seq: Sequence, tokens: tuple[int, ...], logprobs: TokenLogprobs | None
    ) -> RequestOutput:
        usage = Usage(seq.num_prompt_tokens, seq.num_completion_tokens, seq.num_cached_tokens)
        reason = seq.finish_reason.value if seq.finish_reason is not None else None
        prompt_logprobs = None
        if seq.prompt_logprob_spec is not None and not seq.prompt_logprobs_sent:
            seq.prompt_logprobs_sent = True  # the first output: the prefill is done
            prompt_logprobs = tuple(seq.prompt_logprobs)
        return RequestOutput(
            seq.request_id,
            tokens,
            seq.is_finished,
            reason,
            usage,
            seq.error,
            () if logprobs is None else (logprobs,),
            prompt_logprobs,
        )

    # -- convenience --------------------------------------------------------------------------

    def generate(
        self,
        prompts: list[list[int]],
        stop: StopCriteria | None = None,
        sampling: SamplingParams | None = None,
    ) -> list[list[int]]:
        """Run ``prompts`` to completion; completion token ids in prompt order (tests, benches)."""
        ids = [f"generate-{self._next_seq_id + i}" for i in range(len(prompts))]
        for request_id, prompt in zip(ids, prompts, strict=True):
            self.add_request(request_id, prompt, stop, sampling)
        results: dict[str, list[int]] = {request_id: [] for request_id in ids}
        while self.has_unfinished():
            for output in self.step():
                if output.error is not None:
                    raise output.error
                results[output.request_id].extend(output.new_token_ids)
        return [results[request_id] for request_id in ids]


def model_device(model: object) -> torch.device:
    """Where the model's weights live (the KV pool and every step's tensors go there too)."""
    parameters = getattr(model, "parameters", None)
    if parameters is not None:
        for parameter in parameters():
            return parameter.device
    return torch.device("cpu")


def _model_dtype(model: object) -> KVCacheDtype:
    """What ``--kv-cache-dtype auto`` means: the dtype of the model's (first floating) weights."""
    parameters = getattr(model, "parameters", None)
    if parameters is not None:
        for parameter in parameters():
            if parameter.dtype == torch.bfloat16:
                return "bf16"
            if parameter.dtype == torch.float32:
                return "float32"
    return "float32"
