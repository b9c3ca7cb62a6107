"""Cron expressions for ``triggers.crons``: parse, and find the next time one fires (UTC).

Five fields (minute hour day-of-month month day-of-week) with ``*``, lists, ranges, steps and
month/day names; when both day fields are restricted, a day matching either fires (as in Vixie
cron and the platform).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from ember.errors import UserError

_MONTHS = {n: i for i, n in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), 1)}
_DAYS = {n: i for i, n in enumerate("SUN MON TUE WED THU FRI SAT".split())}
_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_MONTH_NAMES = tuple(
    "January February March April May June July August September October November December".split()
)
_LONGEST = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # by month; 29 February in leap years
# A cron that fires at all fires within one Gregorian cycle (400 years): the search's bound,
# reached only by a cron ``never_fires`` cannot see (none today).
MAX_SEARCH_DAYS = 146097
NEVER_RUNS = "(it deploys, and never runs on its schedule)"


class CronNeverFires(UserError):
    """A cron that parses but names no day any year has (``0 0 30 2 *``): it deploys, as on
    the platform, and never runs on its schedule."""

    def __init__(self, cron: str, why: str) -> None:
        super().__init__(f"cron {cron!r} never fires: {why}")
        self.cron = cron
        self.why = why


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed cron expression."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        """Parse ``text``; ValueError says which field is wrong and why."""
        parts = text.split()
        if len(parts) != 5:
            raise ValueError("five fields: minute hour day-of-month month day-of-week")
        sets = [_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(
            text=text,
            minutes=sets[0],
            hours=sets[1],
            days=sets[2],
            months=sets[3],
            weekdays=weekdays,
            days_restricted=parts[2] != "*",
            weekdays_restricted=parts[4] != "*",
        )

    def matches_day(self, day: datetime.date) -> bool:
        """Whether the expression fires on ``day`` (month and day fields)."""
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def never_fires(self) -> str | None:
        """Why no day of any year matches (``there is no 30 February``), or None. Only the day
        of month can rule every day out: a restricted day of week matches (alone, or OR-ed with
        the day of month) some day of every month."""
        if not self.days_restricted or self.weekdays_restricted:
            return None
        if any(day <= _LONGEST[month - 1] for month in self.months for day in self.days):
            return None
        days = _either([str(d) for d in sorted(self.days)])
        months = _either([_MONTH_NAMES[m - 1] for m in sorted(self.months)])
        return f"there is no {days} {months}"

    def next_after(self, moment: datetime.datetime) -> datetime.datetime:
        """The first firing strictly after ``moment`` (timezone-aware, UTC); CronNeverFires
        when there is none."""
        if (why := self.never_fires()) is not None:
            raise CronNeverFires(self.text, why)
        start = moment.astimezone(datetime.UTC).replace(second=0, microsecond=0)
        start += datetime.timedelta(minutes=1)
        day = start.date()
        for _ in range(MAX_SEARCH_DAYS):
            if self.matches_day(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = datetime.datetime(
                            day.year, day.month, day.day, hour, minute, tzinfo=datetime.UTC
                        )
                        if candidate >= start:
                            return candidate
            day += datetime.timedelta(days=1)
        raise CronNeverFires(self.text, f"no day in {MAX_SEARCH_DAYS} days matches")


def _either(items: list[str]) -> str:
    """``30``, ``30 or 31``, ``April, June, September or November``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _field(part: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for item in part.split(","):
        values |= _item(item, name, low, high, names)
    return frozenset(values)


def _item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    base, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not step_text.isdigit() or int(step_text) == 0:
            raise ValueError(f"{name}: step {step_text!r} must be a positive integer")
        step = int(step_text)
    if base == "*":
        first, last = low, high
    elif "-" in base:
        first_text, _, last_text = base.partition("-")
        first, last = (
            _value(first_text, name, low, high, names),
            _value(last_text, name, low, high, names),
        )
        if first > last:
            raise ValueError(f"{name}: range {base!r} runs backwards")
    else:
        first = _value(base, name, low, high, names)
        last = high if step_text else first
    return set(range(first, last + 1, step))


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not text.isdigit():
        raise ValueError(f"{name}: {text!r} is not a number" + (" or a name" if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is outside {low}-{high}")
    return value
