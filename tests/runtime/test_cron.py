"""Cron parsing, and next firing times against a minute-by-minute reference."""

from __future__ import annotations

import calendar
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
                _random_field(rng, 1, 7),
            ]
        )
        expression = CronExpression.parse(text)
        moment = start + datetime.timedelta(minutes=rng.randrange(60 * 24 * 60))
        assert expression.next_after(moment) == _reference_next(expression, moment), text


def test_names_and_day_fields_either_match() -> None:
    expression = CronExpression.parse("0 3 1 jan,JUL mon")
    assert expression.months == {1, 7} and expression.weekdays == {1}  # 0 = Sunday inside
    # Both day fields restricted: the 1st OR a Monday.
    assert expression.matches_day(datetime.date(2026, 1, 5))  # a Monday in January
    assert expression.matches_day(datetime.date(2026, 7, 1))  # the 1st of July


_NO_ZERO = (
    r"day of week: 0 is outside 1-7 \(the platform counts 1 = Sunday to 7 = Saturday; write 1 "
    r"or SUN for Sunday\)"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "five fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* * * * funday", "day of week: 'funday' is not a number or a name"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("0 0 1-15W * *", "day of month: '1-15W' is not a day: L "),
        ("0 0 32W * *", "day of month: 32 is outside 1-31"),
        ("0 0 * * 1#6", "day of week: '1#6': the week after # is 1 to 5"),
        # The platform counts 1 = Sunday to 7 = Saturday: 0 is neither, read either way.
        ("0 9 * * 0", _NO_ZERO),
        ("0 9 * * 0-4", _NO_ZERO),
        ("0 9 * * 0L", _NO_ZERO),
        ("0 9 * * 0#1", _NO_ZERO),
        ("0 9 * * 8", "day of week: 8 is outside 1-7"),
        ("0 0 * * L", "day of week: 'L' is not a day: a day and L "),
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


@pytest.mark.parametrize("text", ["0 0 29 2 *", "0 0 30 2 2", "0 0 31 * *", "0 0 30 1-2 *"])
def test_a_cron_on_a_rare_day_fires(text: str) -> None:
    """29 February (a leap day), 30 February or a Monday (2), the 31st: each has a firing."""
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


def _plain(item: str, low: int, high: int) -> set[int]:
    """The reference's own reading of the plain items the generator below writes."""
    if item == "*":
        return set(range(low, high + 1))
    if item.startswith("*/"):
        return set(range(low, high + 1, int(item[2:])))
    first, _, last = item.partition("-")
    return set(range(int(first), int(last or first) + 1))


def _reference_day(days_text: str, weekdays_text: str, months: frozenset[int], day) -> bool:  # noqa: ANN001
    """Whether ``day`` fires, from the day fields' text, counting days in the month rather
    than computing offsets: W is the Monday-to-Friday of the month nearest the day, LW the
    last of them, 6L the last Friday, 2#2 the second Monday (the platform's 1 = Sunday to
    7 = Saturday; ``weekday`` below counts 0 = Sunday, as Python's isoweekday() % 7)."""
    if day.month not in months:
        return False
    length = calendar.monthrange(day.year, day.month)[1]
    month = [datetime.date(day.year, day.month, d) for d in range(1, length + 1)]
    workdays = [d.day for d in month if d.isoweekday() <= 5]
    in_days = in_weekdays = False
    for item in days_text.split(","):
        if item == "L":
            in_days |= day.day == length
        elif item == "LW":
            in_days |= day.day == max(workdays)
        elif item.endswith("W"):
            n = int(item[:-1])
            in_days |= n <= length and day.day == min(workdays, key=lambda d: abs(d - n))
        else:
            in_days |= day.day in _plain(item, 1, 31)
    weekday = day.isoweekday() % 7
    same = [d.day for d in month if d.isoweekday() % 7 == weekday]
    for item in weekdays_text.split(","):
        if item.endswith("L"):
            in_weekdays |= int(item[:-1]) - 1 == weekday and day.day == same[-1]
        elif "#" in item:
            n, k = map(int, item.split("#"))
            in_weekdays |= n - 1 == weekday and len(same) >= k and day.day == same[k - 1]
        else:
            in_weekdays |= weekday in {d - 1 for d in _plain(item, 1, 7)}
    if days_text != "*" and weekdays_text != "*":
        return in_days or in_weekdays
    return in_days and in_weekdays


def _reference_next_special(
    expression: CronExpression, moment: datetime.datetime, years: int
) -> datetime.datetime | None:
    """Minute by minute over ``years`` years (the days that fire, by the reference)."""
    _, _, days_text, _, weekdays_text = expression.text.split()
    start = moment.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
    day = start.date()
    while day < start.date() + datetime.timedelta(days=366 * years):
        if _reference_day(days_text, weekdays_text, expression.months, day):
            minute = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)
            while minute.date() == day:
                if minute >= start and minute.hour in expression.hours:
                    if minute.minute in expression.minutes:
                        return minute
                minute += datetime.timedelta(minutes=1)
        day += datetime.timedelta(days=1)
    return None


def _special_days(rng: random.Random) -> str:
    items = [
        rng.choice(["L", "LW", f"{rng.randint(1, 31)}W", str(rng.randint(1, 31)), "*"])
        for _ in range(rng.randint(1, 2))
    ]
    return "*" if "*" in items else ",".join(items)


def _special_weekdays(rng: random.Random) -> str:
    items = [
        rng.choice(
            [f"{rng.randint(1, 7)}L", f"{rng.randint(1, 7)}#{rng.randint(1, 5)}", "*", "2-6"]
        )
        for _ in range(rng.randint(1, 2))
    ]
    return "*" if "*" in items else ",".join(items)


def test_last_weekday_and_nth_match_the_reference_on_random_expressions() -> None:
    """L, LW, nW, nL and n#k (the platform's, refused before review38), against a reference
    that counts the month's days: over four years, each a few months apart."""
    rng = random.Random(38)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for _ in range(120):
        months = rng.choice(["*", "2", "2,4", "1-12/3", str(rng.randint(1, 12))])
        text = (
            f"{rng.randint(0, 59)} {rng.randint(0, 23)} {_special_days(rng)} {months} "
            f"{_special_weekdays(rng)}"
        )
        expression = CronExpression.parse(text)
        moment = start + datetime.timedelta(minutes=rng.randrange(60 * 24 * 366 * 3))
        expected = _reference_next_special(expression, moment, years=4)
        if expected is not None:
            assert expression.next_after(moment) == expected, text
            continue
        try:
            found = expression.next_after(moment)
        except CronNeverFires:
            continue
        assert found > moment + datetime.timedelta(days=366 * 4), text


def test_the_platforms_examples() -> None:
    """``59 23 LW * *`` (the docs' example) and the others, on 2026's calendar."""
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def next_day(text: str) -> str:
        return CronExpression.parse(text).next_after(at).strftime("%a %d %b")

    assert next_day("59 23 LW * *") == "Fri 30 Jan"  # the 31st is a Saturday
    assert next_day("0 9 * 2 6L") == "Fri 27 Feb"
    assert next_day("0 9 * * 2#2") == "Mon 12 Jan"
    assert next_day("0 9 15W 2 *") == "Mon 16 Feb"  # the 15th is a Sunday
    assert next_day("0 9 1W 8 *") == "Mon 03 Aug"  # a Saturday 1st: never into July
    assert next_day("0 9 31W 5 *") == "Fri 29 May"  # a Sunday 31st: never into June
    assert next_day("0 0 L 2 *") == "Sat 28 Feb"


def _days_fired(text: str, days: int) -> list[str]:
    """The days ``text`` fires on in 2026's first ``days`` days, as ``Sun 04 Jan``."""
    expression = CronExpression.parse(text)
    first = datetime.date(2026, 1, 1)
    fired = [first + datetime.timedelta(days=n) for n in range(days)]
    return [d.strftime("%a %d %b") for d in fired if expression.matches_day(d)]


def test_the_docs_weekday_examples_fire_on_the_platforms_days() -> None:
    """The Cron Triggers docs' table: weekdays 1-7 with 1 = Sunday (Quartz's numbering);
    ember counted Unix's 0/7 = Sunday, 1 = Monday, so ``0 17 * * 1`` fired on Mondays."""
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)  # a Thursday

    def next_at(text: str) -> str:
        return CronExpression.parse(text).next_after(at).strftime("%a %d %b %H:%M")

    assert next_at("0 17 * * 1") == next_at("0 17 * * sun") == "Sun 04 Jan 17:00"
    assert _days_fired("10 7 * * 2-6", 14) == _days_fired("10 7 * * mon-fri", 14)
    weekdays = [d for d in _days_fired("* * * * *", 14) if not d.startswith(("Sat", "Sun"))]
    assert _days_fired("10 7 * * 2-6", 14) == weekdays and len(weekdays) == 10
    assert next_at("0 18 * * 6L") == next_at("0 18 * * friL") == "Fri 30 Jan 18:00"
    assert next_at("59 23 LW * *") == "Fri 30 Jan 23:59"
    assert _days_fired("0 0 * * 7", 14) == ["Sat 03 Jan", "Sat 10 Jan"]  # 7 = Saturday
    assert _days_fired("0 0 * * */2", 7) == ["Thu 01 Jan", "Sat 03 Jan", "Sun 04 Jan", "Tue 06 Jan"]
    assert next_at("0 9 * * 2#2") == "Mon 12 Jan 09:00"
    assert _days_fired("0 0 * * sun-sat", 7) == _days_fired("0 0 * * 1-7", 7)


def test_a_stored_cron_that_no_longer_parses_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A schedule saved while ember read weekday 0 as Sunday: ember serve must still start.
    from ember.runtime.platform.crons import schedulable

    with caplog.at_level("WARNING"):
        kept = schedulable([{"cron": "0 9 * * 0"}, {"cron": "0 9 * * 1"}], "acct/worker")
    assert kept == ("0 9 * * 1",)
    assert "acct/worker" in caplog.text and "'0 9 * * 0'" in caplog.text
    assert "outside 1-7" in caplog.text


@pytest.mark.parametrize("cron", ["0 0 * * ５", "0 0 ² * *", "*/５ * * * *", "0 0 * * 2#２"])
def test_digits_are_ascii_digits(cron: str) -> None:
    # review40: a full-width 5 parsed as Thursday, and '²' failed int() naming no field.
    with pytest.raises(ValueError, match="day of|minute|not a number|week after #"):
        CronExpression.parse(cron)


def test_an_old_numbered_cron_is_warned_of_once_a_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # review43: the warning came at every refresh, and a refresh follows every deploy.
    from ember.runtime.cron import WEEKDAY_NUMBERING
    from ember.runtime.platform.crons import schedulable

    old = [{"cron": "0 9 * * 2-6"}, {"cron": "0 9 * * MON"}, {"cron": "*/5 * * * *"}]
    warned: set[tuple[str, str]] = set()
    with caplog.at_level("WARNING"):
        for _ in range(3):
            kept = schedulable([*old, {"cron": "0 9 * * 0"}], "acct/worker", warned)
            assert kept == tuple(i["cron"] for i in old)  # weekday 0 left out
        stamped = [{"cron": "0 9 * * 2-6", "weekdays": WEEKDAY_NUMBERING}]
        assert schedulable(stamped, "acct/other", warned) == ("0 9 * * 2-6",)
    lines = [r.getMessage() for r in caplog.records if "fires a day earlier" in r.getMessage()]
    assert len(lines) == 1 and "'0 9 * * 2-6'" in lines[0], lines  # names say the same day
    unparsed = [r for r in caplog.records if "does not parse" in r.getMessage()]
    assert len(unparsed) == 1  # review44: this one came at every refresh too
    assert warned == {("acct/worker", "0 9 * * 2-6"), ("acct/worker", "0 9 * * 0")}
