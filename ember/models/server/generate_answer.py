"""One ``/generate`` answer as it accumulates (``sglang_routes.generate``): its text, output ids
and logprobs, and the SGLang payload built from them at each step."""

from __future__ import annotations

import time

from ember.models.api.completion_request import GenerateRequest
from ember.models.api.generate_response import (
    LogprobEntry,
    generate_finish_reason,
    generate_response,
)
from ember.models.api.responses import Usage
from ember.models.engine.logprob_types import PromptTokenLogprob, clamp_logprob
from ember.models.server.answer_ids import sglang_choice_id
from ember.models.server.generation import GenerationEvent, GenerationInput
from ember.models.server.inputs import logprob_token
from ember.models.server.loading import ServedModel


def shown_id(request_id: str, choice: int, n: int) -> str:
    """``meta_info.id`` of choice ``choice``: the request's id, or with ``n`` > 1 SGLang's
    name for the choice (``answer_ids.py``), the id an SGLang client aborts it by."""
    return request_id if n == 1 else sglang_choice_id(request_id, choice)


class GenerateAnswer:
    """The cumulative ``/generate`` answer of one request."""

    def __init__(
        self, served: ServedModel, parsed: GenerateRequest, request: GenerationInput, rid: str
    ):
        self.served, self.parsed, self.request = served, parsed, request
        self.rid = rid  # meta_info.id
        self.text: list[str] = []
        self.ids: list[int] = []
        self.logprobs: list[LogprobEntry] = []
        self.top_logprobs: list[list[LogprobEntry]] = []
        self.input_logprobs: list[LogprobEntry] | None = None
        self.input_top_logprobs: list[list[LogprobEntry] | None] | None = None
        if parsed.return_logprob and parsed.logprob_start_len < 0:
            # SGLang's default start is the last prompt token: its one entry is null, so
            # the engine has nothing to compute.
            self.add_prompt(())

    def add(self, event: GenerationEvent) -> None:
        self.text.append(event.text)
        self.ids.extend(event.token_ids)
        if event.prompt_logprobs is not None:
            self.add_prompt(event.prompt_logprobs)
        for record in event.logprobs:
            self.logprobs.append(self._entry(record.logprob, record.token_id))
            self.top_logprobs.append([self._entry(lp, token) for token, lp in record.top])

    def add_prompt(self, scored: tuple[PromptTokenLogprob, ...]) -> None:
        """SGLang's input logprobs: the prompt from ``logprob_start_len`` (its last token when
        -1 or past the end, as SGLang) on, the first entry null, then the engine's scores of
        the tokens after it."""
        prompt = self.request.prompt_ids
        start = self.parsed.logprob_start_len
        if not 0 <= start < len(prompt):
            start = len(prompt) - 1
        self.input_logprobs = [self._entry(None, prompt[start])]
        self.input_logprobs += [self._entry(s.logprob, s.token_id) for s in scored]
        self.input_top_logprobs = [None]
        self.input_top_logprobs += [[self._entry(lp, t) for t, lp in s.top] for s in scored]

    def _entry(self, logprob: float | None, token_id: int) -> LogprobEntry:
        value = None if logprob is None else clamp_logprob(logprob)
        if not self.parsed.return_text_in_logprobs:
            return value, token_id, None  # SGLang's (logprob, id, None) unless text is asked for
        return value, token_id, logprob_token(self.served, token_id)[0]

    def payload(self, event: GenerationEvent) -> dict:
        finish = None
        text = "".join(self.text)
        if event.finished:
            reason = event.finish_reason or "stop"
            matched = event.matched_stop
            finish = generate_finish_reason(
                reason,
                matched=matched,
                length=event.completion_tokens if reason == "length" else None,
            )
        return generate_response(
            rid=self.rid,
            text=text,
            output_ids=self.ids,
            usage=Usage(event.prompt_tokens, event.completion_tokens, event.cached_tokens),
            finish_reason=finish,
            e2e_latency=time.perf_counter() - self.request.arrival,
            output_token_logprobs=self.logprobs if self.parsed.return_logprob else None,
            output_top_logprobs=self.top_logprobs if self.parsed.top_logprobs_num else None,
            input_token_logprobs=self.input_logprobs,
            input_top_logprobs=self.input_top_logprobs if self.parsed.top_logprobs_num else None,
        )
