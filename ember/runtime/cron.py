"""Cron expressions for ``triggers.crons``: parse, and find the next time one fires (UTC).

Five fields (minute hour day-of-month month day-of-week) with ``*``, lists, ranges, steps and
month/day names; when both day fields are restricted, a day matching either fires (as in Vixie
cron and the platform). The day of week counts as the platform (and Quartz) does: 1 = Sunday
to 7 = Saturday, so ``*/2`` is Sunday, Tuesday, Thursday and Saturday; Unix's 0 is refused,
as Quartz refuses it (read as Sunday here, it would be no day there). The platform's days
relative to the month are items of a list too: ``L`` (the month's last day), ``15W`` (the
weekday nearest the 15th, within the month: a Saturday 1st moves to Monday the 3rd, a Sunday
31st to Friday the 29th; ``31W`` fires in no month without a 31st), ``LW`` (the last weekday)
in the day of month; ``6L`` (the month's last Friday) and ``2#2`` (its second Monday) in the
day of week.
"""

from __future__ import annotations

import calendar
import datetime
import re
from dataclasses import dataclass, field

from ember.errors import UserError

_MONTHS = {n: i for i, n in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), 1)}
_DAYS = {n: i for i, n in enumerate("SUN MON TUE WED THU FRI SAT".split(), 1)}  # as written
_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 1, 7, _DAYS),
)
# Said when a day of week is out of range: 0 is Sunday to a Unix cron, and no day here.
_WEEKDAY_COUNT = "the platform counts 1 = Sunday to 7 = Saturday; write 1 or SUN for Sunday"
_MONTH_NAMES = tuple(
    "January February March April May June July August September October November December".split()
)
_LONGEST = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # by month; 29 February in leap years
# A cron that fires at all fires within one Gregorian cycle (400 years): the search's bound,
# reached only by a cron ``never_fires`` cannot see (none today).
# Stored with each cron ``ember serve`` keeps (PUT .../schedules): how its weekdays count. One
# stored before (ember 0 = Sunday, until the platform's numbering) has none, and is warned of.
WEEKDAY_NUMBERING = "1-7 from Sunday"
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
    weekdays: frozenset[int]  # 0 = Sunday (isoweekday() % 7), not the written 1 = Sunday
    days_restricted: bool
    weekdays_restricted: bool
    month_days: MonthDays = field(default_factory=lambda: MonthDays())

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        """Parse ``text``; ValueError says which field is wrong and why."""
        parts = text.split()
        if len(parts) != 5:
            raise ValueError("five fields: minute hour day-of-month month day-of-week")
        plain = list(parts)
        plain[2], special_days = _month_days(parts[2])
        plain[4], special_weekdays = _month_weekdays(parts[4])
        sets = [
            _field(part, *spec) if part else frozenset()
            for part, spec in zip(plain, _FIELDS, strict=True)
        ]
        weekdays = frozenset(d - 1 for d in sets[4])
        return cls(
            text=text,
            minutes=sets[0],
            hours=sets[1],
            days=sets[2],
            months=sets[3],
            weekdays=weekdays,
            days_restricted=parts[2] != "*",
            weekdays_restricted=parts[4] != "*",
            month_days=MonthDays(
                last="L" in special_days,
                last_weekday="LW" in special_days,
                nearest_weekday=frozenset(int(d[:-1]) for d in special_days if _digits(d[:-1])),
                last_of=frozenset(d for d, n in special_weekdays if n == 0),
                nth_of=frozenset((d, n) for d, n in special_weekdays if n > 0),
            ),
        )

    def matches_day(self, day: datetime.date) -> bool:
        """Whether the expression fires on ``day`` (month and day fields)."""
        if day.month not in self.months:
            return False
        in_days = day.day in self.days or self.month_days.day_matches(day)
        in_weekdays = (day.isoweekday() % 7) in self.weekdays or self.month_days.weekday_matches(
            day
        )
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def never_fires(self) -> str | None:
        """Why no day of any year matches (``there is no 30 February``), or None. Only the day
        of month can rule every day out: a restricted day of week matches (alone, or OR-ed with
        the day of month) some day of every month."""
        if not self.days_restricted or self.weekdays_restricted:
            return None
        if self.month_days.last or self.month_days.last_weekday:
            return None  # every month has a last day and a weekday
        # 15W fires only in a month that has a 15th.
        numbers = self.days | self.month_days.nearest_weekday
        if any(day <= _LONGEST[month - 1] for month in self.months for day in numbers):
            return None
        days = _either([str(d) for d in sorted(numbers)])
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


@dataclass(frozen=True, slots=True)
class MonthDays:
    """The day fields' items relative to the month: what a plain set of numbers cannot say."""

    last: bool = False  # L: the month's last day
    last_weekday: bool = False  # LW: its last Monday-to-Friday
    nearest_weekday: frozenset[int] = frozenset()  # 15W: the weekday nearest the 15th
    last_of: frozenset[int] = frozenset()  # 6L: the month's last Friday, kept as 5 (0 = Sunday)
    nth_of: frozenset[tuple[int, int]] = frozenset()  # 2#2: (1, 2), its second Monday

    def day_matches(self, day: datetime.date) -> bool:
        """Whether the day of month's ``L``, ``LW`` or ``nW`` items name ``day``."""
        length = calendar.monthrange(day.year, day.month)[1]
        if self.last and day.day == length:
            return True
        if self.last_weekday and day.day == _weekday_near(day, length, length):
            return True
        return any(day.day == _weekday_near(day, n, length) for n in self.nearest_weekday)

    def weekday_matches(self, day: datetime.date) -> bool:
        """Whether the day of week's ``nL`` or ``n#k`` items name ``day``."""
        weekday = day.isoweekday() % 7
        if weekday in self.last_of and day.day + 7 > calendar.monthrange(day.year, day.month)[1]:
            return True
        return (weekday, (day.day - 1) // 7 + 1) in self.nth_of


def _weekday_near(day: datetime.date, target: int, length: int) -> int | None:
    """The Monday-to-Friday nearest the ``target``-th of ``day``'s month, never outside it; None
    when the month has no such day."""
    if target > length:
        return None
    weekday = datetime.date(day.year, day.month, target).weekday()  # 5 Saturday, 6 Sunday
    if weekday == 5:
        return target - 1 if target > 1 else target + 2
    if weekday == 6:
        return target + 1 if target < length else target - 2
    return target


_NEAREST = re.compile(r"(\d+)W")
_LAST_OF = re.compile(r"(\w+?)L")
_NTH_OF = re.compile(r"(\w+)#(\w+)")


def _month_days(part: str) -> tuple[str, tuple[str, ...]]:
    """The day of month's plain items (``""`` when there are none) and its ``L``, ``LW`` and
    ``nW`` items, checked."""
    plain, special = [], []
    for item in part.split(","):
        upper = item.upper()
        if upper in ("L", "LW"):
            special.append(upper)
        elif match := _NEAREST.fullmatch(upper):
            _value(match[1], "day of month", 1, 31, {})
            special.append(str(int(match[1])) + "W")
        elif "L" in upper or "W" in upper:
            raise ValueError(
                f"day of month: {item!r} is not a day: L (the last), LW (the last weekday) or "
                "one day and W (15W: the weekday nearest the 15th; no range, no step)"
            )
        else:
            plain.append(item)
    return ",".join(plain), tuple(special)


def _month_weekdays(part: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The day of week's plain items and its ``nL`` (as ``(n, 0)``) and ``n#k`` items, each
    day counted from 0 = Sunday."""
    plain, special = [], []
    for item in part.split(","):
        upper = item.upper()
        if match := _NTH_OF.fullmatch(upper):
            weekday = _value(match[1], "day of week", 1, 7, _DAYS) - 1
            if not _digits(match[2]) or not 1 <= int(match[2]) <= 5:
                raise ValueError(f"day of week: {item!r}: the week after # is 1 to 5 (2#2)")
            special.append((weekday, int(match[2])))
        elif match := _LAST_OF.fullmatch(upper):  # no day's name ends in L
            special.append((_value(match[1], "day of week", 1, 7, _DAYS) - 1, 0))
        elif "#" in upper or "L" in upper:
            raise ValueError(
                f"day of week: {item!r} is not a day: a day and L (6L: the month's last Friday) "
                "or a day, # and the week (2#2: its second Monday)"
            )
        else:
            plain.append(item)
    return ",".join(plain), tuple(special)


def _field(part: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for item in part.split(","):
        values |= _item(item, name, low, high, names)
    return frozenset(values)


def _item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    base, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not _digits(step_text) or int(step_text) == 0:
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
    if not _digits(text):
        raise ValueError(f"{name}: {text!r} is not a number" + (" or a name" if names else ""))
    value = int(text)
    if not low <= value <= high:
        hint = f" ({_WEEKDAY_COUNT})" if names is _DAYS else ""
        raise ValueError(f"{name}: {value} is outside {low}-{high}{hint}")
    return value


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` takes ``５`` (read as 5) and ``²`` (int() refuses)."""
    return text.isascii() and text.isdigit()
