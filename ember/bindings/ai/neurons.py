"""Neurons: what an AI request costs, and each account's daily allowance of them.

Workers AI prices inference in neurons ($0.011 per 1,000) and gives every account 10,000 a day,
reset at 00:00 UTC; past them a Free account's requests are refused with 3036 (HTTP 429), "You
have used up your daily free allocation of 10,000 neurons..." (reference/workers-api.md §1.8,
§1.9). ``ember serve`` gives temporary accounts that allowance (``platform.temporary.
ai_neurons_per_day``): the running share bounds how many slots an account holds at once, not
how long it holds them, and 8 requests of 1,500 tokens with ``ignore_eos`` held a replica for
190 s while another account's 8-token call waited (walk18).

A request's neurons come from its usage, at the model's published price per million input and
output tokens (``RATES``, reference/workers-api.md §1.7, turned into neurons at $0.011 per
1,000). A model ember serves that Cloudflare does not price is counted at the cheapest rate
ember knows (glm-4.7-flash's), so an operator's own model never costs more than a priced one.
Cached prompt tokens are counted as input tokens: dearer than the platform, never cheaper.

The check comes before admission and the cost after the answer, as on the platform: an account
with 1 neuron left starts a request that may cost 50, and then has none. The requests it runs at
once are bounded by its share of the model (``ember.models.pool.fair``), so that overshoot is too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ember.bindings.daily import DailyUsage
from ember.models.api.errors import ACCOUNT_LIMITED
from ember.models.pool.errors import CapacityExceeded, quota_exceeded

PRICE_PER_NEURON = 0.011 / 1000  # dollars (reference/workers-api.md §1.9)
FREE_NEURONS_PER_DAY = 10_000


@dataclass(frozen=True, slots=True)
class Rate:
    """Neurons per million input and output tokens."""

    input: float
    output: float

    @classmethod
    def of_price(cls, input_per_m: float, output_per_m: float) -> Rate:
        """From the catalog's dollars per million tokens."""
        return cls(input_per_m / PRICE_PER_NEURON, output_per_m / PRICE_PER_NEURON)

    def neurons(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


# Dollars per million input / output tokens, from the platform's model catalog.
RATES: Mapping[str, Rate] = {
    "@cf/moonshotai/kimi-k2.5": Rate.of_price(0.60, 3.00),
    "@cf/moonshotai/kimi-k2.6": Rate.of_price(0.95, 4.00),
    "@cf/moonshotai/kimi-k2.7-code": Rate.of_price(0.95, 4.00),
    "@cf/zai-org/glm-4.7-flash": Rate.of_price(0.0605, 0.40),  # 5,500 / 36,364 neurons
    "@cf/zai-org/glm-5.2": Rate.of_price(1.40, 4.40),
    "@cf/zai-org/glm-5.3": Rate.of_price(1.40, 4.40),
    "@cf/zai-org/glm-5.3-flash": Rate.of_price(0.15, 0.50),
}
CHEAPEST = min(RATES.values(), key=lambda rate: (rate.output, rate.input))


def neurons_of(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """The neurons of one answer of ``model`` with that usage."""
    return RATES.get(model, CHEAPEST).neurons(prompt_tokens, completion_tokens)


def usage_tokens(usage: object) -> tuple[int, int] | None:
    """(prompt tokens, completion tokens) of a usage object, None when it has neither."""
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    return (
        prompt if isinstance(prompt, int) and prompt > 0 else 0,
        completion if isinstance(completion, int) and completion > 0 else 0,
    )


def spent_message(allowance: int) -> str:
    """The platform's 3036 text, naming this allowance (10,000: the platform's words exactly)."""
    return ACCOUNT_LIMITED.description.replace(
        f"{FREE_NEURONS_PER_DAY:,} neurons", f"{allowance:,} neurons"
    )


class NeuronBook:
    """Each account's neurons today (keyed by the tenant's data scope: an account's REST calls,
    its workers' ``env.AI`` and its batches spend one allowance), and the allowance each scope
    was last seen with (a queued batch's requests run later, without their caller)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.usage = DailyUsage(clock)
        self._allowances: dict[str, int] = {}

    def admit(self, scope: str, allowance: int | None) -> None:
        """Raise 3036 when ``scope`` has used its ``allowance`` (None: no limit) today."""
        if allowance is None:
            self._allowances.pop(scope, None)
            return
        self._allowances[scope] = allowance
        self.check(scope)

    def check(self, scope: str) -> None:
        """Raise 3036 when ``scope`` has used the allowance it was last admitted with."""
        allowance = self._allowances.get(scope)
        if allowance is None:
            return
        used = self.usage.used(scope)
        if used >= allowance:
            raise self.spent(scope, used, allowance)

    def spent(self, scope: str, used: float, allowance: int) -> CapacityExceeded:
        return quota_exceeded(
            "AI neurons per day",
            round(used, 2),
            allowance,
            spent_message(allowance),
            self.usage.seconds_to_reset(),  # Retry-After: the next 00:00 UTC
        )

    def spend(self, scope: str, model: str, usage: object) -> None:
        """Count an answer's neurons (from its usage object) for ``scope``."""
        tokens = usage_tokens(usage)
        if tokens is not None and scope in self._allowances:
            self.usage.add(scope, neurons_of(model, *tokens))

    def spend_answer(self, scope: str, model: str, body: object) -> None:
        """Count a whole answer's neurons (its body's ``usage``)."""
        if isinstance(body, Mapping):
            self.spend(scope, model, body.get("usage"))

    def meter(self, scope: str, model: str, body: dict[str, Any]) -> StreamMeter | None:
        """A meter for a stream of ``scope`` about to be sent upstream as ``body`` (None: not
        metered). A stream whose caller did not ask for usage (OpenAI's dialect: it is opt-in)
        asks its replica for it here; the meter says to hide it from the caller again."""
        if scope not in self._allowances:
            return None
        options = body.get("stream_options")
        asked = isinstance(options, Mapping) and options.get("include_usage") is True
        if not asked:
            body["stream_options"] = {**(options or {}), "include_usage": True}
        text = body.get("messages", body.get("prompt", ""))
        estimate = len(json.dumps(text, ensure_ascii=False).encode()) // 4
        return StreamMeter(self, scope, model, estimate, hide_usage=not asked)


class StreamMeter:
    """The usage of one stream, read from its replica events as they go by.

    A metered stream always asks its replica for usage (OpenAI's dialect only when the caller
    asked: the gateway adds ``include_usage`` and hides the usage chunk then). A stream cut
    short (the caller left, the replica failed) has none: it is counted as ``prompt_estimate``
    input tokens and one output token per event that carried choices.
    """

    _USAGE = re.compile(r'"(prompt_tokens|completion_tokens)"\s*:\s*(\d+)')

    def __init__(
        self,
        book: NeuronBook,
        scope: str,
        model: str,
        prompt_estimate: int,
        *,
        hide_usage: bool = False,
    ) -> None:
        self.hide_usage = hide_usage  # the caller did not ask for usage: it must not see it
        self._book = book
        self._scope = scope
        self._model = model
        self._prompt_estimate = prompt_estimate
        self._events = 0
        self._usage: dict[str, int] = {}
        self._done = False

    def feed(self, data: str) -> None:
        """One replica event (its data line)."""
        if '"usage"' in data and "_tokens" in data:
            found = {name: int(value) for name, value in self._USAGE.findall(data)}
            if found:
                self._usage = found
                return
        if '"choices":[{' in data or '"choices": [{' in data:
            self._events += 1

    def end(self) -> None:
        """The stream is over: count it (once)."""
        if self._done:
            return
        self._done = True
        usage: dict[str, int] = self._usage or {
            "prompt_tokens": self._prompt_estimate,
            "completion_tokens": self._events,
        }
        self._book.spend(self._scope, self._model, usage)
