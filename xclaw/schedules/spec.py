"""[schedules] When a schedule fires: a cron expression, a period, or one moment
(docs/schedules.md).

Every time here is integer milliseconds since the epoch, UTC, so every worker computes the
same ticks: a tick is a schedule's own time to fire, and with the schedule's id it names the
fire (`fire_id`) whichever worker claims it.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import hmac
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from xclaw.errors import EXIT_USAGE, BadRequest
from xclaw.schedules.cron import Cron, CronError

# Ticks handed out for one schedule in one check at most (catch-up `all` after a long
# downtime): the rest are counted as skipped.
MAX_TICKS_PER_CHECK = 1000
_WALK_MS = 86_400_000
_DELIVERY = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_EVERY = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")


def no_step_to_fork(session_id: str) -> str:
    """Why a session with no step cannot be a schedule's template, and what to do instead:
    the words of every place that refuses one (the Python API, the HTTP API, the command
    line, a fire)."""
    return (
        f"the template session {session_id} has no step to fork from (a fork copies a "
        "session up to its last step): send it its first message, or have the schedule "
        "send to it (--session, or fork=False) instead of forking it"
    )


class ScheduleError(BadRequest):
    """A schedule or webhook that cannot be: a bad expression, period, time, policy or name
    (a wrong call: exit 2 on the command line, 400 on the HTTP API)."""

    exit_code = EXIT_USAGE


class Kind(enum.Enum):
    CRON = "cron"
    EVERY = "every"
    AT = "at"


class CatchUp(enum.Enum):
    """What a schedule does with the ticks it missed while no worker ran (or it was paused):
    none of them (`skip`), one for all of them (`once`), each of them (`all`)."""

    SKIP = "skip"
    ONCE = "once"
    ALL = "all"


def parse_every(text: str) -> int:
    """`30m` → milliseconds; s, m, h, d; at least one second."""
    found = _EVERY.match(text)
    if found is None:
        raise ScheduleError(f"{text!r}: a period is a number and a unit: 30s, 30m, 2h, 1d")
    ms = int(found.group(1)) * _UNITS[found.group(2)]
    if ms < 1_000:
        raise ScheduleError(f"{text!r}: a period is at least one second")
    return ms


def parse_at(text: str, tz: ZoneInfo) -> int:
    """An ISO 8601 time (`2026-12-24T09:00`, `…Z`, `…+01:00`); without an offset, in `tz`."""
    try:
        at = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleError(f"{text!r}: not a time (ISO 8601: 2026-12-24T09:00)") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=tz)
    return int(at.timestamp() * 1000)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"{name!r}: not a time zone (UTC, Europe/Paris, …)") from None


@dataclass(frozen=True, slots=True)
class When:
    """A schedule's times: `spec` is the cron text, the period in ms, or the moment in ms;
    `anchor` the time a period counts from (its creation), so ticks are fixed."""

    kind: Kind
    spec: str
    tz: str = "UTC"
    anchor: int = 0

    @classmethod
    def make(cls, kind: Kind, text: str, tz: str, now_ms: int) -> When:
        """From what a person typed: checked, normalised (a period and a moment in ms)."""
        zi = zone(tz)
        if kind is Kind.CRON:
            try:
                Cron.parse(text)
            except CronError as e:
                raise ScheduleError(str(e)) from None
            return cls(kind, text.strip(), tz, now_ms)
        if kind is Kind.EVERY:
            return cls(kind, str(parse_every(text)), tz, now_ms)
        return cls(kind, str(parse_at(text, zi)), tz, now_ms)

    def next_after(self, after_ms: int) -> int | None:
        """The first tick strictly after `after_ms`; None when there is none (a moment past,
        an expression that never matches)."""
        if self.kind is Kind.AT:
            at = int(self.spec)
            return at if at > after_ms else None
        if self.kind is Kind.EVERY:
            period = int(self.spec)
            if after_ms < self.anchor:
                return self.anchor + period
            return self.anchor + ((after_ms - self.anchor) // period + 1) * period
        after = dt.datetime.fromtimestamp(after_ms / 1000, dt.UTC)
        found = Cron.parse(self.spec).next_after(after, zone(self.tz))
        return None if found is None else int(found.timestamp() * 1000)

    def first(self) -> int | None:
        """The first tick after the schedule was made (a moment already past: itself, fired
        at once)."""
        if self.kind is Kind.AT:
            return int(self.spec)
        return self.next_after(self.anchor)

    def due(self, first_ms: int, now_ms: int) -> tuple[list[int], int]:
        """The ticks from `first_ms` up to `now_ms` (the last MAX_TICKS_PER_CHECK of them),
        and how many more were due before those. A period's are counted, not walked; a cron
        expression's are walked for at most a day before `now_ms` after a long downtime (the
        ones before are counted as one)."""
        if first_ms > now_ms:
            return [], 0
        if self.kind is Kind.EVERY:
            period = int(self.spec)
            n = (now_ms - first_ms) // period + 1
            keep = min(n, MAX_TICKS_PER_CHECK)
            start = first_ms + (n - keep) * period
            return [start + i * period for i in range(keep)], n - keep
        extra = 0
        t: int | None = first_ms
        if now_ms - first_ms > _WALK_MS:  # a long downtime: the older ones as one
            extra = 1
            t = self.next_after(now_ms - _WALK_MS)
        ticks: list[int] = []
        while t is not None and t <= now_ms:
            ticks.append(t)
            t = self.next_after(t)
        if len(ticks) > MAX_TICKS_PER_CHECK:
            extra += len(ticks) - MAX_TICKS_PER_CHECK
            ticks = ticks[-MAX_TICKS_PER_CHECK:]
        return ticks, extra

    def describe(self) -> str:
        if self.kind is Kind.EVERY:
            ms = int(self.spec)
            for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
                if ms % size == 0:
                    return f"every {ms // size}{unit}"
            return f"every {ms // 1000}s"
        if self.kind is Kind.AT:
            at = dt.datetime.fromtimestamp(int(self.spec) / 1000, zone(self.tz))
            return f"at {at.isoformat(timespec='minutes')}"
        return f"cron {self.spec}" + ("" if self.tz == "UTC" else f" ({self.tz})")


def chosen_ticks(
    policy: CatchUp, ticks: list[int], extra: int, now_ms: int, grace_ms: int
) -> tuple[list[int], int]:
    """Which due ticks fire, by the catch-up policy, and how many are skipped. The last due
    tick is on time when it is at most `grace_ms` old (a worker a moment late, or busy): it
    fires under every policy. The others were missed (no worker ran): `skip` fires none of
    them, `once` one (the last), `all` each."""
    if not ticks:
        return [], extra
    last = ticks[-1]
    on_time = now_ms - last <= grace_ms
    if policy is CatchUp.ALL:
        return ticks, extra
    if policy is CatchUp.ONCE or on_time:
        return [last], extra + len(ticks) - 1
    return [], extra + len(ticks)


def fire_id(schedule_id: str, tick_ms: int) -> str:
    """A fire's deterministic id: the schedule's and the tick's. It is the message id the
    fire's message is recorded with (docs/protocol.md `messageId`: its characters)."""
    return f"schedule.{schedule_id}.{tick_ms}"


def hook_fire_id(name: str, delivery: str) -> str:
    """A webhook delivery's fire id: the hook's name and the sender's delivery id (hashed
    when it has other characters, or is long)."""
    if not _DELIVERY.match(delivery):
        delivery = hashlib.sha256(delivery.encode()).hexdigest()[:40]
    return f"hook.{name}.{delivery}"


def fork_session_id(seed: str, tick_ms: int) -> str:
    """The session a schedule's fork at `tick_ms` gets: derived from the schedule's secret
    seed, so a retried fire finds the fork it made, and nobody can guess it (124 bits)."""
    return "f" + hmac.new(seed.encode(), str(tick_ms).encode(), hashlib.sha256).hexdigest()[:31]
