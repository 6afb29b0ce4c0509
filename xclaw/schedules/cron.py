"""[schedules] A five-field cron expression (minute hour day-of-month month day-of-week) and the
next time it matches: ranges (`1-5`), steps (`*/15`, `10-50/10`), lists (`1,15,30`), month and day
names (`jan`, `mon`), 0 or 7 for Sunday. As in Vixie cron, when both day fields are restricted a day
matching either one matches. Small on purpose (docs/schedules.md): no seconds field, no `L`/`W`/`#`,
no `@reboot`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (name, low, high, names counted from `low`)
_FIELDS: tuple[tuple[str, int, int, list[str]], ...] = (
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day of month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_SHORTHANDS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Far enough for any expression that matches at all (29 February on a Monday: 28 years).
_MAX_DAYS = 366 * 29


class CronError(ValueError):
    """An expression that is not five valid fields; says which field and why."""


def _number(text: str, name: str, low: int, names: list[str]) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + low
    if not text.isdigit():
        raise CronError(f"{name}: {text!r} is not a number")
    return int(text)


def _field(text: str, name: str, low: int, high: int, names: list[str]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"{name}: an empty item in {text!r}")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{name}: the step {step_text!r} is not a positive number")
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _number(a, name, low, names), _number(b, name, low, names)
        else:
            first = _number(base, name, low, names)
            last = high if step_text else first  # `5/15`: from 5 on, every 15
        if not (low <= first <= high and low <= last <= high):
            raise CronError(f"{name}: {part!r} is outside {low}-{high}")
        if first > last:
            raise CronError(f"{name}: the range {base!r} runs backwards")
        values.update(range(first, last + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed expression: the values each field allows."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 is read as 0)
    any_day: bool  # day of month was `*`
    any_weekday: bool  # day of week was `*`

    @classmethod
    def parse(cls, text: str) -> Cron:
        return _parse(text)

    @classmethod
    def _parse(cls, text: str) -> Cron:
        expr = _SHORTHANDS.get(text.strip().lower(), text)
        parts = expr.split()
        if len(parts) != 5:
            raise CronError(
                f"{text!r}: a cron expression has five fields (minute hour day-of-month "
                f"month day-of-week), this has {len(parts)}"
            )
        sets = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(
            text.strip(),
            sets[0],
            sets[1],
            sets[2],
            sets[3],
            weekdays,
            any_day=parts[2].startswith("*"),
            any_weekday=parts[4].startswith("*"),
        )

    def _day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:  # one restricted (or none): both must hold
            return in_month and in_week
        return in_month or in_week  # both restricted: either (as cron has always done)

    def next_after(self, after: dt.datetime, tz: ZoneInfo) -> dt.datetime | None:
        """The first matching minute strictly after `after` (aware), in UTC; None if the
        expression never matches (`0 0 31 2 *`). Walks days, not minutes."""
        local = after.astimezone(tz)
        day = local.date()
        hours, minutes = sorted(self.hours), sorted(self.minutes)
        for _ in range(_MAX_DAYS):
            if self._day_matches(day):
                for h in hours:
                    for m in minutes:
                        naive = dt.datetime(day.year, day.month, day.day, h, m)
                        at = naive.replace(tzinfo=tz)
                        # A time the clocks skip (spring forward) is not there: skipped.
                        if at.astimezone(dt.UTC).astimezone(tz).replace(tzinfo=None) != naive:
                            continue
                        if at > after:
                            return at.astimezone(dt.UTC)
            day += dt.timedelta(days=1)
        return None


@lru_cache(maxsize=4096)
def _parse(text: str) -> Cron:
    return Cron._parse(text)
