"""The cron parser and the ticks of a schedule (xclaw/schedules/cron.py, spec.py): fields,
ranges, steps, lists, names, the two day fields, time zones; periods, moments; the catch-up
policies. Pure: no clock, no database."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from xclaw.schedules.cron import Cron, CronError
from xclaw.schedules.spec import (
    MAX_TICKS_PER_CHECK,
    CatchUp,
    Kind,
    ScheduleError,
    When,
    chosen_ticks,
    fire_id,
    fork_session_id,
    hook_fire_id,
    parse_every,
)

UTC = ZoneInfo("UTC")


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def nxt(expr: str, after: str, tz: str = "UTC") -> str:
    found = Cron.parse(expr).next_after(at(after), ZoneInfo(tz))
    assert found is not None
    return found.strftime("%Y-%m-%d %H:%M %a")


def test_fields_ranges_steps_and_lists() -> None:
    c = Cron.parse("*/15 9-17/4 1,15 jan-mar mon-fri")
    assert c.minutes == {0, 15, 30, 45}
    assert c.hours == {9, 13, 17}
    assert c.days == {1, 15}
    assert c.months == {1, 2, 3}
    assert c.weekdays == {1, 2, 3, 4, 5}
    assert Cron.parse("5/20 * * * *").minutes == {5, 25, 45}  # from 5 on, every 20
    assert Cron.parse("0 0 * * 7").weekdays == {0}  # 7 is Sunday too
    assert Cron.parse("@hourly").minutes == {0}


def test_weekdays_at_nine() -> None:
    # 2026-12-04 is a Friday: the next weekday 09:00 after Friday 10:00 is Monday.
    assert nxt("0 9 * * 1-5", "2026-12-04T10:00") == "2026-12-07 09:00 Mon"
    assert nxt("0 9 * * 1-5", "2026-12-04T08:59") == "2026-12-04 09:00 Fri"
    # Strictly after: a time that matches is not its own next.
    assert nxt("0 9 * * 1-5", "2026-12-04T09:00") == "2026-12-07 09:00 Mon"


def test_both_day_fields_restricted_match_either() -> None:
    # The 13th, or any Friday (as cron has always done).
    assert nxt("0 0 13 * 5", "2026-12-05T00:00") == "2026-12-11 00:00 Fri"
    assert nxt("0 0 13 * 5", "2026-12-12T00:00") == "2026-12-13 00:00 Sun"
    # Only one restricted: that one decides.
    assert nxt("0 0 13 * *", "2026-12-05T00:00") == "2026-12-13 00:00 Sun"


def test_a_rare_date_and_one_that_never_comes() -> None:
    assert nxt("0 0 29 2 *", "2026-03-01T00:00") == "2028-02-29 00:00 Tue"
    assert Cron.parse("0 0 31 2 *").next_after(at("2026-01-01T00:00"), UTC) is None


def test_a_time_zone_and_the_hour_the_clocks_skip() -> None:
    # 09:00 in Paris is 08:00 UTC in winter.
    assert nxt("0 9 * * *", "2026-12-04T10:00", "Europe/Paris") == "2026-12-05 08:00 Sat"
    # 2027-03-28 02:30 does not exist in Paris (02:00 -> 03:00): that day has no such time.
    assert nxt("30 2 * * *", "2027-03-27T02:00", "Europe/Paris") == "2027-03-29 00:30 Mon"


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("* * * *", "five fields"),
        ("60 * * * *", "minute: '60' is outside 0-59"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("a * * * *", "not a number"),
        ("1,,2 * * * *", "empty"),
    ],
)
def test_bad_expressions_say_which_field(expr: str, says: str) -> None:
    with pytest.raises(CronError, match=says):
        Cron.parse(expr)


def test_periods_and_moments() -> None:
    assert parse_every("30m") == 1_800_000
    assert parse_every("2s") == 2_000
    for bad in ("30", "0s", "m", "1y", "-5m"):
        with pytest.raises(ScheduleError):
            parse_every(bad)
    w = When.make(Kind.EVERY, "30m", "UTC", now_ms=1_000)
    assert w.first() == 1_801_000
    assert w.next_after(1_801_000) == 3_601_000  # fixed from the anchor, whoever asks
    assert w.next_after(1_800_999) == 1_801_000
    once = When.make(Kind.AT, "2026-12-24T09:00", "Europe/Paris", now_ms=0)
    assert once.first() == int(at("2026-12-24T08:00").timestamp() * 1000)
    assert once.next_after(once.first() or 0) is None
    with pytest.raises(ScheduleError, match="time zone"):
        When.make(Kind.CRON, "* * * * *", "Mars/Olympus", now_ms=0)


def test_due_ticks_of_a_period_are_counted_not_walked() -> None:
    w = When(Kind.EVERY, "1000", "UTC", 0)
    assert w.due(1_000, 3_500) == ([1_000, 2_000, 3_000], 0)
    assert w.due(5_000, 3_500) == ([], 0)
    ticks, extra = w.due(1_000, 10**9)  # eleven days of one-second ticks
    assert len(ticks) == MAX_TICKS_PER_CHECK and ticks[-1] == 10**9
    assert extra == 10**6 - MAX_TICKS_PER_CHECK


def test_due_ticks_of_a_cron_expression() -> None:
    w = When(Kind.CRON, "*/10 * * * *", "UTC", 0)
    start = int(at("2026-12-04T10:00").timestamp() * 1000)
    ticks, extra = w.due(start, start + 25 * 60_000)
    assert [(t - start) // 60_000 for t in ticks] == [0, 10, 20] and extra == 0


def test_catch_up_policies() -> None:
    ticks = [1_000, 2_000, 3_000]
    # The last one on time (within the grace): it fires under every policy.
    assert chosen_ticks(CatchUp.SKIP, ticks, 0, 3_500, 1_000) == ([3_000], 2)
    assert chosen_ticks(CatchUp.ONCE, ticks, 0, 3_500, 1_000) == ([3_000], 2)
    assert chosen_ticks(CatchUp.ALL, ticks, 0, 3_500, 1_000) == (ticks, 0)
    # All of them missed (the grace long past): skip fires none, once one, all each.
    assert chosen_ticks(CatchUp.SKIP, ticks, 4, 60_000, 1_000) == ([], 7)
    assert chosen_ticks(CatchUp.ONCE, ticks, 4, 60_000, 1_000) == ([3_000], 6)
    assert chosen_ticks(CatchUp.ALL, ticks, 4, 60_000, 1_000) == (ticks, 4)
    assert chosen_ticks(CatchUp.SKIP, [], 0, 1, 1) == ([], 0)


def test_ids_are_deterministic_and_fit_a_message_id() -> None:
    import re

    from xclaw.wire.protocol import MESSAGE_ID_PATTERN

    assert fire_id("sch1", 5) == fire_id("sch1", 5) != fire_id("sch1", 6)
    long = hook_fire_id("ci", "x" * 300 + ":/?")
    for made in (fire_id("sch0123456789ab", 1_765_000_000_000), hook_fire_id("ci", "d-1"), long):
        assert re.match(MESSAGE_ID_PATTERN, made), made
    a, b = fork_session_id("seed", 1), fork_session_id("seed", 2)
    assert a != b and a == fork_session_id("seed", 1) != fork_session_id("other", 1)
    assert len(a) == 32 and a[0].isalpha()
