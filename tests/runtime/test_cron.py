"""Cron parsing, and next firing times against a minute-by-minute reference."""

from __future__ import annotations

import datetime
import random
from pathlib import Path

import pytest

from ember.config import load_project
from ember.runtime.cron import CronExpression, CronNeverFires
from ember.runtime.project_check import check_project
from ember.runtime.scheduler import CronScheduler


def _reference_next(expression: CronExpression, moment: datetime.datetime) -> datetime.datetime:
    """The slow way: test every minute."""
    candidate = moment.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
    while True:
        if (
            candidate.minute in expression.minutes
            and candidate.hour in expression.hours
            and expression.matches_day(candidate.date())
        ):
            return candidate
        candidate += datetime.timedelta(minutes=1)


def _random_field(rng: random.Random, low: int, high: int) -> str:
    choice = rng.randrange(5)
    if choice == 0:
        return "*"
    if choice == 1:
        return f"*/{rng.randint(1, max(1, (high - low) // 2))}"
    a = rng.randint(low, high)
    if choice == 2:
        return str(a)
    b = rng.randint(a, high)
    if choice == 3:
        return f"{a}-{b}"
    return ",".join(str(rng.randint(low, high)) for _ in range(rng.randint(1, 3)))


def test_next_after_matches_the_reference_on_random_expressions() -> None:
    rng = random.Random(1234)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for _ in range(150):
        text = " ".join(
            [
                _random_field(rng, 0, 59),
                _random_field(rng, 0, 23),
                _random_field(rng, 1, 28),
                "*",
                _random_field(rng, 0, 6),
            ]
        )
        expression = CronExpression.parse(text)
        moment = start + datetime.timedelta(minutes=rng.randrange(60 * 24 * 60))
        assert expression.next_after(moment) == _reference_next(expression, moment), text


def test_names_and_day_fields_either_match() -> None:
    expression = CronExpression.parse("0 3 1 jan,JUL mon")
    assert expression.months == {1, 7} and expression.weekdays == {1}
    # Both day fields restricted: the 1st OR a Monday.
    assert expression.matches_day(datetime.date(2026, 1, 5))  # a Monday in January
    assert expression.matches_day(datetime.date(2026, 7, 1))  # the 1st of July


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "five fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* * * * funday", "day of week: 'funday' is not a number or a name"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
    ],
)
def test_bad_expressions_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CronExpression.parse(text)


def test_scheduler_fires_each_due_cron_with_its_time() -> None:
    import asyncio

    now = [datetime.datetime(2026, 3, 1, 12, 0, 30, tzinfo=datetime.UTC).timestamp()]
    fired: list[tuple[str, float]] = []

    async def fake_sleep(seconds: float) -> None:
        now[0] += seconds
        await asyncio.sleep(0)  # let triggered events run
        if len(fired) >= 3:
            raise asyncio.CancelledError

    async def trigger(cron: str, when: float) -> None:
        fired.append((cron, when))

    async def scenario() -> None:
        scheduler = CronScheduler(
            ("*/5 * * * *", "1 12 * * *"), trigger, clock=lambda: now[0], sleep=fake_sleep
        )
        task = asyncio.ensure_future(scheduler.run())
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    times = [
        datetime.datetime.fromtimestamp(when / 1000, datetime.UTC).strftime("%H:%M")
        for _, when in fired
    ]
    assert [c for c, _ in fired][:3] == ["1 12 * * *", "*/5 * * * *", "*/5 * * * *"]
    assert times[:3] == ["12:01", "12:05", "12:10"]


def test_a_cron_that_never_fires_is_never_run_and_stops_no_other() -> None:
    """``0 0 30 2 *`` (30 February) parses, and deploys, but has no next firing: the
    scheduler's task died of the ValueError, taking the worker's other crons with it."""
    import asyncio

    now = [datetime.datetime(2026, 3, 1, 12, 0, 30, tzinfo=datetime.UTC).timestamp()]
    fired: list[str] = []
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
        await asyncio.sleep(0)
        if len(fired) >= 2:
            raise asyncio.CancelledError

    async def trigger(cron: str, when: float) -> None:
        fired.append(cron)

    async def scenario(crons: tuple[str, ...]) -> None:
        scheduler = CronScheduler(crons, trigger, clock=lambda: now[0], sleep=fake_sleep)
        await scheduler.run()

    asyncio.run(scenario(("0 0 30 2 *",)))  # returns: nothing to wait for
    assert fired == [] and slept == []
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario(("0 0 30 2 *", "*/5 * * * *")))
    assert fired == ["*/5 * * * *", "*/5 * * * *"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("0 0 30 2 *", "there is no 30 February"),
        ("0 0 30,31 feb *", "there is no 30 or 31 February"),
        ("0 0 31 4,6,9,11 *", "there is no 31 April, June, September or November"),
    ],
)
def test_a_cron_that_never_fires_says_why(text: str, why: str) -> None:
    """review38: it was skipped by catching any ValueError, and nothing told the user."""
    expression = CronExpression.parse(text)
    assert expression.never_fires() == why
    with pytest.raises(CronNeverFires) as error:
        expression.next_after(datetime.datetime(2026, 12, 7, tzinfo=datetime.UTC))
    assert str(error.value) == f"cron {text!r} never fires: {why}"
    assert error.value.cron == text


@pytest.mark.parametrize("text", ["0 0 29 2 *", "0 0 30 2 1", "0 0 31 * *", "0 0 30 1-2 *"])
def test_a_cron_on_a_rare_day_fires(text: str) -> None:
    """29 February (a leap day), 30 February or a Monday, the 31st: each has a firing."""
    assert CronExpression.parse(text).never_fires() is None


def test_a_cron_that_never_fires_deploys_with_a_warning_naming_it(tmp_path: Path) -> None:
    """The config check (``ember dev``'s and ``ember deploy``'s) warns, and accepts it: the
    CLI test deploys ``0 0 30 2 *`` on purpose as a cron that never runs by itself."""
    (tmp_path / "ember.yaml").write_text(
        "name: w\nmain: worker.py\ntriggers:\n  crons: ['*/5 * * * *', '0 0 30 2 *']\n"
    )
    (tmp_path / "worker.py").write_text("x = 1\n")
    checked = check_project(load_project(tmp_path))
    assert checked.config.crons == ("*/5 * * * *", "0 0 30 2 *")
    assert [w for w in checked.warnings if "never fires" in w] == [
        "ember.yaml: triggers.crons[1] '0 0 30 2 *' never fires: there is no 30 February "
        "(it deploys, and never runs on its schedule)"
    ]
