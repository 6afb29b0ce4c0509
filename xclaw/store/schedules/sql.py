"""[store/schedules] Schedules, webhooks and their fires (migration 7, `schedules`;
docs/schedules.md).

Both backends, one SQL text (dialect.py): `store.schedules`, a role over the backend's
connection layer (store/role.py) like the teams'. Writes come as values of store/steps/writes.py (`AddSchedule`, `ClaimTicks`, …,
each a row of SYNC) whose transaction bodies are here (`_schedule_tx`); reads are methods.

Why a tick fires once: a worker claims it by moving the schedule's `next_fire` on only if it
still holds the tick it read (compare-and-set, in the transaction that writes the fire), so of
several workers one claims it; the fire's id is the message id it is recorded with in its
session (turn_start: a message id recorded already starts nothing), so a delivery retried
after a kill, by any worker, runs nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import StoreError
from xclaw.errors import UnknownSchedule as ScheduleNotFound
from xclaw.store.role import Role

if TYPE_CHECKING:
    from xclaw.store.dialect import Dialect
    from xclaw.store.steps.writes import ScheduleWrite

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Schedule:
    schedule_id: str
    kind: str  # cron | every | at (xclaw/schedules/spec.py `Kind`)
    spec: str
    tz: str
    anchor: int
    session_id: str | None  # the session its message goes to, or
    fork_of: str | None  # the template a new session is forked from at each fire
    message: str
    catch_up: str  # skip | once | all
    paused: bool
    created_by: str | None  # the user; None: the admin (the server's token, the command line)
    created_at: int
    updated_at: int
    next_fire: int | None  # the tick nobody has claimed yet; None: no more (a moment past)
    last_fire: int | None
    fired: int
    skipped: int
    seed: str  # secret: a fork's session id is derived from it and the tick

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.schedule_id,
            "kind": self.kind,
            "spec": self.spec,
            "tz": self.tz,
            "sessionId": self.session_id,
            "forkOf": self.fork_of,
            "message": self.message,
            "catchUp": self.catch_up,
            "paused": self.paused,
            "createdBy": self.created_by,
            "createdAt": self.created_at,
            "nextFire": self.next_fire,
            "lastFire": self.last_fire,
            "fired": self.fired,
            "skipped": self.skipped,
        }


@dataclass(frozen=True, slots=True)
class Hook:
    name: str
    session_id: str
    template: str
    secret: str
    created_by: str | None
    created_at: int

    def to_json(self) -> dict[str, Any]:  # never the secret
        return {
            "name": self.name,
            "sessionId": self.session_id,
            "template": self.template,
            "createdBy": self.created_by,
            "createdAt": self.created_at,
            "url": f"/hooks/{self.name}",
        }


@dataclass(frozen=True, slots=True)
class NewFire:
    """A fire as its claim writes it."""

    fire_id: str
    source: str  # schedule | hook
    source_id: str
    session_id: str  # the target: the session, or the fork to be made
    message: str
    created_by: str | None
    tick: int | None = None
    fork_of: str | None = None


@dataclass(frozen=True, slots=True)
class Fire:
    fire_id: str
    source: str
    source_id: str
    tick: int | None
    session_id: str
    fork_of: str | None
    message: str
    created_by: str | None
    state: str  # pending | delivered | refused
    note: str | None
    deferrals: int
    seq: int | None  # the message's step once delivered
    worker_id: str | None
    claimed_until: int
    created_at: int
    updated_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.fire_id,
            "source": self.source,
            "sourceId": self.source_id,
            "tick": self.tick,
            "sessionId": self.session_id,
            "state": self.state,
            "note": self.note,
            "deferrals": self.deferrals,
            "step": None if self.seq is None else f"s{self.seq:04d}",
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


_SCHEDULE_COLS = (
    "schedule_id, kind, spec, tz, anchor, session_id, fork_of, message, catch_up, paused,"
    " created_by, created_at, updated_at, next_fire, last_fire, fired, skipped, seed"
)
_INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({_SCHEDULE_COLS})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_GET_SCHEDULE = f"SELECT {_SCHEDULE_COLS} FROM schedules WHERE schedule_id=?"
_SCHEDULES = f"SELECT {_SCHEDULE_COLS} FROM schedules ORDER BY created_at, schedule_id"
_SCHEDULES_BY = (
    f"SELECT {_SCHEDULE_COLS} FROM schedules WHERE created_by=? ORDER BY created_at, schedule_id"
)
_DUE = (
    f"SELECT {_SCHEDULE_COLS} FROM schedules WHERE paused = 0 AND next_fire <= ?"
    " ORDER BY next_fire LIMIT ?"
)
_NEXT_DUE = "SELECT MIN(next_fire) FROM schedules WHERE paused = 0"
_PAUSE = "UPDATE schedules SET paused=?, updated_at=? WHERE schedule_id=?"
# Resumed: the ticks of the pause are missed ones, dealt with by the catch-up policy.
_REMOVE_SCHEDULE = "DELETE FROM schedules WHERE schedule_id=?"
_CLAIM = (
    "UPDATE schedules SET next_fire=?, last_fire=COALESCE(?, last_fire), fired=fired+?,"
    " skipped=skipped+?, updated_at=? WHERE schedule_id=? AND next_fire=? AND paused=0"
)
_FIRE_COLS = (
    "fire_id, source, source_id, tick, session_id, fork_of, message, created_by, state, note,"
    " deferrals, seq, worker_id, claimed_until, created_at, updated_at"
)
_INSERT_FIRE = (
    f"INSERT INTO fires ({_FIRE_COLS})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', NULL, 0, NULL, ?, ?, ?, ?)"
    " ON CONFLICT (fire_id) DO NOTHING"
)
_GET_FIRE = f"SELECT {_FIRE_COLS} FROM fires WHERE fire_id=?"
_PENDING = (
    f"SELECT {_FIRE_COLS} FROM fires WHERE state='pending' AND claimed_until <= ?"
    " ORDER BY claimed_until, created_at, tick LIMIT ?"
)
_FIRES_OF = (
    f"SELECT {_FIRE_COLS} FROM fires WHERE source_id=? ORDER BY created_at DESC, fire_id LIMIT ?"
)
_TAKE = (
    "UPDATE fires SET worker_id=?, claimed_until=?, updated_at=?"
    " WHERE fire_id=? AND state='pending' AND claimed_until <= ?"
)
_SETTLE = (
    "UPDATE fires SET state=?, note=?, seq=COALESCE(?, seq), deferrals=deferrals+?,"
    " claimed_until=?, updated_at=? WHERE fire_id=? AND state='pending'"
)
_HOOK_COLS = "name, session_id, template, secret, created_by, created_at"
_INSERT_HOOK = (
    f"INSERT INTO hooks ({_HOOK_COLS}) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (name) DO NOTHING RETURNING 1"
)
_GET_HOOK = f"SELECT {_HOOK_COLS} FROM hooks WHERE name=?"
_HOOKS = f"SELECT {_HOOK_COLS} FROM hooks ORDER BY name"
_REMOVE_HOOK = "DELETE FROM hooks WHERE name=?"


def _schedule(r: Any) -> Schedule:
    return Schedule(
        str(r[0]),
        str(r[1]),
        str(r[2]),
        str(r[3]),
        int(r[4]),
        r[5],
        r[6],
        str(r[7]),
        str(r[8]),
        bool(r[9]),
        r[10],
        int(r[11]),
        int(r[12]),
        None if r[13] is None else int(r[13]),
        None if r[14] is None else int(r[14]),
        int(r[15]),
        int(r[16]),
        str(r[17]),
    )


def _fire(r: Any) -> Fire:
    return Fire(
        str(r[0]),
        str(r[1]),
        str(r[2]),
        None if r[3] is None else int(r[3]),
        str(r[4]),
        r[5],
        str(r[6]),
        r[7],
        str(r[8]),
        r[9],
        int(r[10]),
        None if r[11] is None else int(r[11]),
        r[12],
        int(r[13]),
        int(r[14]),
        int(r[15]),
    )


def _hook(r: Any) -> Hook:
    return Hook(str(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4], int(r[5]))


class ScheduleMethods(Role):
    """The ScheduleStore protocol (xclaw/store/base.py) for both backends: the reads, and the
    transaction bodies of the schedule writes (store/steps/writes.py)."""

    # --- reads ------------------------------------------------------------------------------
    def get_schedule(self, schedule_id: str) -> Schedule:
        sql = self._dialect.sql(_GET_SCHEDULE)
        row = self._read(lambda c: c.execute(sql, (schedule_id,)).fetchone())
        if row is None:
            raise ScheduleNotFound(f"no schedule {schedule_id!r}")
        return _schedule(row)

    def schedules(self, *, created_by: str | None = None) -> list[Schedule]:
        """Every schedule, or those `created_by` made."""
        if created_by is None:
            sql = self._dialect.sql(_SCHEDULES)
            rows = self._read(lambda c: c.execute(sql).fetchall())
        else:
            sql = self._dialect.sql(_SCHEDULES_BY)
            rows = self._read(lambda c: c.execute(sql, (created_by,)).fetchall())
        return [_schedule(r) for r in rows]

    def due_schedules(self, now_ms: int, limit: int = 500) -> list[Schedule]:
        """Schedules not paused whose next tick is at or before `now_ms`, earliest first (an
        index range: idle schedules cost nothing here)."""
        sql = self._dialect.sql(_DUE)
        return [
            _schedule(r) for r in self._read(lambda c: c.execute(sql, (now_ms, limit)).fetchall())
        ]

    def next_due(self) -> int | None:
        """The earliest tick of any schedule not paused; None: none."""
        sql = self._dialect.sql(_NEXT_DUE)
        row = self._read(lambda c: c.execute(sql).fetchone())
        return None if row is None or row[0] is None else int(row[0])

    def get_fire(self, fire_id: str) -> Fire | None:
        sql = self._dialect.sql(_GET_FIRE)
        row = self._read(lambda c: c.execute(sql, (fire_id,)).fetchone())
        return None if row is None else _fire(row)

    def pending_fires(self, now_ms: int, limit: int = 100) -> list[Fire]:
        """Fires not yet delivered that no worker holds (its claim ran out, or a deferral)."""
        sql = self._dialect.sql(_PENDING)
        return [_fire(r) for r in self._read(lambda c: c.execute(sql, (now_ms, limit)).fetchall())]

    def fires_of(self, source_id: str, limit: int = 50) -> list[Fire]:
        """A schedule's (or a hook's) latest fires, newest first."""
        sql = self._dialect.sql(_FIRES_OF)
        return [
            _fire(r) for r in self._read(lambda c: c.execute(sql, (source_id, limit)).fetchall())
        ]

    def get_hook(self, name: str) -> Hook | None:
        sql = self._dialect.sql(_GET_HOOK)
        row = self._read(lambda c: c.execute(sql, (name,)).fetchone())
        return None if row is None else _hook(row)

    def hooks(self) -> list[Hook]:
        sql = self._dialect.sql(_HOOKS)
        return [_hook(r) for r in self._read(lambda c: c.execute(sql).fetchall())]

    # --- the bodies of the writes (store/steps/writes.py `prepare`) --------------------------------------
    def _schedule_tx(self, w: ScheduleWrite) -> Callable[[Any], Any]:
        from xclaw.store.steps import writes as v

        d, now = self._dialect, self._now()
        if isinstance(w, v.AddSchedule):
            s = w.schedule
            row = (
                s.schedule_id, s.kind, s.spec, s.tz, s.anchor, s.session_id, s.fork_of,
                s.message, s.catch_up, int(s.paused), s.created_by, now, now, s.next_fire,
                s.last_fire, s.fired, s.skipped, s.seed,
            )  # fmt: skip

            def add(conn: Any) -> Schedule:
                for sid in (s.session_id, s.fork_of):
                    if sid is not None:
                        d.require_session(conn, sid)
                conn.execute(d.sql(_INSERT_SCHEDULE), row)
                return _schedule(row)

            return add
        if isinstance(w, v.ChangeSchedule):

            def change(conn: Any) -> bool:
                if w.remove:
                    cur = conn.execute(d.sql(_REMOVE_SCHEDULE), (w.schedule_id,))
                else:
                    cur = conn.execute(d.sql(_PAUSE), (int(bool(w.paused)), now, w.schedule_id))
                if cur.rowcount == 0:
                    raise ScheduleNotFound(f"no schedule {w.schedule_id!r}")
                return True

            return change
        if isinstance(w, v.ClaimTicks):

            def claim(conn: Any) -> bool:
                last = max((f.tick for f in w.fires if f.tick is not None), default=None)
                cur = conn.execute(
                    d.sql(_CLAIM),
                    (w.next_fire, last, len(w.fires), w.skipped, now, w.schedule_id, w.expected),
                )
                if cur.rowcount == 0:  # another worker claimed it, or it was paused or removed
                    return False
                _insert_fires(d, conn, w.fires, w.worker_id, w.claimed_until, now)
                return True

            return claim
        if isinstance(w, v.RecordDelivery):

            def record(conn: Any) -> bool:
                return _insert_fires(d, conn, (w.fire,), w.worker_id, w.claimed_until, now) == 1

            return record
        if isinstance(w, v.TakeFire):

            def take(conn: Any) -> bool:
                args = (w.worker_id, w.claimed_until, now, w.fire_id, w.now)
                return bool(conn.execute(d.sql(_TAKE), args).rowcount == 1)

            return take
        if isinstance(w, v.SettleFire):

            def settle(conn: Any) -> bool:
                args = (
                    w.state, w.note, w.seq, int(w.deferred), w.retry_at, now, w.fire_id,
                )  # fmt: skip
                return bool(conn.execute(d.sql(_SETTLE), args).rowcount == 1)

            return settle
        if isinstance(w, v.AddHook):
            h = w.hook
            hrow = (h.name, h.session_id, h.template, h.secret, h.created_by, now)

            def add_hook(conn: Any) -> Hook:
                d.require_session(conn, h.session_id)
                if not conn.execute(d.sql(_INSERT_HOOK), hrow).fetchall():
                    raise StoreError(f"there is already a webhook named {h.name!r}")
                return _hook(hrow)

            return add_hook
        assert isinstance(w, v.RemoveHook)

        def remove_hook(conn: Any) -> bool:
            if conn.execute(d.sql(_REMOVE_HOOK), (w.name,)).rowcount == 0:
                raise ScheduleNotFound(f"no webhook {w.name!r}")
            return True

        return remove_hook


def _insert_fires(
    d: Dialect, conn: Any, fires: Any, worker_id: str, claimed_until: int, now: int
) -> int:
    added = 0
    for f in fires:
        cur = conn.execute(
            d.sql(_INSERT_FIRE),
            (
                f.fire_id, f.source, f.source_id, f.tick, f.session_id, f.fork_of, f.message,
                f.created_by, worker_id, claimed_until, now, now,
            ),
        )  # fmt: skip
        added += cur.rowcount
    return added
