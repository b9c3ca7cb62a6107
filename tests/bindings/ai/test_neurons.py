"""Neurons: an answer's cost from its usage at the platform's prices, each account's daily
allowance checked before admission and given back at 00:00 UTC (a clock seam, no sleeps), and a
stream's usage read from its replica events (estimated when it was cut short)."""

from __future__ import annotations

import pytest

from ember.bindings.ai.neurons import NeuronBook, StreamMeter, neurons_of
from ember.models.pool.errors import CapacityExceeded

GLM = "@cf/zai-org/glm-4.7-flash"
KIMI = "@cf/moonshotai/kimi-k2.5"
MIDNIGHT = 1_800_000_000 - 1_800_000_000 % 86_400
PLATFORM_WORDS = (
    "You have used up your daily free allocation of 10,000 neurons. Please upgrade to "
    "Cloudflare's Workers Paid plan if you would like to continue usage."
)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_neurons_follow_the_platforms_prices() -> None:
    # glm-4.7-flash: $0.0605 / $0.40 per million tokens at $0.011 per 1,000 neurons.
    assert neurons_of(GLM, 1_000_000, 0) == pytest.approx(5_500)
    assert neurons_of(GLM, 0, 1_000_000) == pytest.approx(36_363.6, abs=0.1)
    assert neurons_of(KIMI, 1000, 1000) == pytest.approx(54.545 + 272.727, abs=0.01)
    # An id the platform does not price costs what the cheapest priced one does.
    assert neurons_of("@cf/openai/gpt-oss-120b", 1000, 1000) == neurons_of(GLM, 1000, 1000)


def test_the_allowance_is_checked_before_admission_and_resets_at_midnight_utc() -> None:
    clock = Clock(MIDNIGHT + 20 * 3600)
    book = NeuronBook(clock)
    book.admit("account:a", 10_000)
    # 1,500 output tokens of kimi-k2.5: ~409 neurons each; the 25th answer passes 10,000.
    usage = {"prompt_tokens": 0, "completion_tokens": 1500}
    for _ in range(24):
        book.spend("account:a", KIMI, usage)
        book.admit("account:a", 10_000)
    book.spend("account:a", KIMI, usage)
    with pytest.raises(CapacityExceeded) as spent:
        book.admit("account:a", 10_000)
    assert spent.value.code.code == 3036 and spent.value.code.status == 429
    assert spent.value.description == PLATFORM_WORDS
    assert spent.value.retry_after == pytest.approx(4 * 3600)
    # A batch's request, run later without its caller, is held to the same allowance.
    with pytest.raises(CapacityExceeded):
        book.check("account:a")
    book.admit("account:b", 10_000)  # another account's day is its own
    book.admit("account:c", None)  # no allowance: never refused, never counted
    book.spend("account:c", KIMI, {"prompt_tokens": 10**9, "completion_tokens": 10**9})
    book.admit("account:c", None)

    clock.now = MIDNIGHT + 86_400 - 0.5
    with pytest.raises(CapacityExceeded):
        book.admit("account:a", 10_000)
    clock.now = MIDNIGHT + 86_400
    book.admit("account:a", 10_000)
    book.check("account:a")


def test_an_allowance_other_than_the_platforms_is_named_in_its_words() -> None:
    book = NeuronBook(Clock(MIDNIGHT))
    book.admit("s", 5)
    book.spend("s", GLM, {"prompt_tokens": 1000, "completion_tokens": 200})
    with pytest.raises(CapacityExceeded) as spent:
        book.admit("s", 5)
    assert spent.value.description.startswith(
        "You have used up your daily free allocation of 5 neurons. Please upgrade"
    )


def test_a_stream_is_counted_from_its_usage_event_or_estimated_when_cut() -> None:
    book = NeuronBook(Clock(MIDNIGHT))
    book.admit("s", 1_000_000)
    meter = StreamMeter(book, "s", GLM, prompt_estimate=999)
    for data in (
        '{"choices":[{"delta":{"content":"a"}}]}',
        '{"choices":[{"delta":{"content":"b"}}]}',
        '{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}',
        "[DONE]",
    ):
        meter.feed(data)
    meter.end()
    meter.end()  # once
    assert book.usage.used("s") == pytest.approx(neurons_of(GLM, 10, 2))

    cut = StreamMeter(book, "t", GLM, prompt_estimate=400)
    book.admit("t", 1_000_000)
    for _ in range(3):
        cut.feed('{"choices":[{"delta":{"content":"x"}}]}')
    cut.end()
    assert book.usage.used("t") == pytest.approx(neurons_of(GLM, 400, 3))
