"""[store/postgres] PostgresStore: the Store protocol on PostgreSQL, for several workers on one
database — its roles (store/roles.py) over PgDb, the connection layer of the pool.

Every public method is one transaction on a pooled connection (a run's WriteStream: its queued
units in one). Writes lock the session row (`SELECT ... FOR UPDATE`) before they allocate a
sequence number, move the status or check a lease's fencing token, so concurrent workers and
threads serialise per session and never across sessions. Every status write is
postgres.rows.write_status, which asks model.next_status (checked transitions).
Durability per commit follows the SQLite policy (see postgres.conn and docs/postgres.md).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from xclaw.errors import StoreError
from xclaw.store.access import Access, check_found
from xclaw.store.budgets.sql import BudgetMethods
from xclaw.store.common import (
    encoded_json,
    event_of_answer,
    event_of_new_step,
    moves_session,
    new_step,
)
from xclaw.store.dialect import to_postgres
from xclaw.store.leases import Lease
from xclaw.store.postgres.conn import Pool, connect, migrate_postgres, parse_url, postgres_history
from xclaw.store.postgres.leases import PgLeases
from xclaw.store.postgres.opening import open_turn_tx
from xclaw.store.postgres.rows import (
    POSTGRES,
    lock_session,
    pg_json,
    pg_text,
    write_status,
)
from xclaw.store.roles import DbBase, StoreRoles
from xclaw.store.schedules.sql import ScheduleMethods
from xclaw.store.snapshots.sql import SnapshotMethods
from xclaw.store.steps.columns import Table
from xclaw.store.steps.model import (
    Completion,
    NewStep,
    Status,
    Step,
    StepStatus,
    StepType,
)
from xclaw.store.steps.record import RecordRole
from xclaw.store.steps.rows import (
    FINISH_COLUMNS,
    FINISH_STEP,
    FINISH_STEP_SPENT,
    HOLD_COLUMNS,
    STEP_COLS_NO_OUTPUT,
    STEPS,
    now_ms,
    row_to_finished_step,
)
from xclaw.store.steps.sql import approval_pending, not_running
from xclaw.store.steps.stream import SerialBatches, WriteStream
from xclaw.store.steps.writes import Hold, Kind, OpenTurn, Spent, TxBodies, sync_for
from xclaw.store.teams.sql import TeamMethods

if TYPE_CHECKING:
    from xclaw.store.fsck_rows import FsckAccess
    from xclaw.store.postgres.bus import PgBus

T = TypeVar("T")


# The step's row (every column as model.Step declares it, and the writing worker), inserted in
# the same statement as the session's move (postgres.rows.write_status): fewer round trips.
_INSERT_STEP_CTE = (
    f"WITH step AS (INSERT INTO traces ({STEPS.names('worker')}) "
    f"VALUES ({STEPS.named_placeholders('worker')}))"
)
# ... with an LLM call's budget hold in its row.
_INSERT_HELD_STEP_CTE = (
    f"WITH step AS (INSERT INTO traces ({STEPS.names('worker', *HOLD_COLUMNS)}) "
    f"VALUES ({STEPS.named_placeholders('worker', *HOLD_COLUMNS)}))"
)
_STEP_NAMES = [c.name for c in STEPS.columns]
_FINISH_STEP = to_postgres(f"{FINISH_STEP} RETURNING {STEP_COLS_NO_OUTPUT}")
# ... settling an LLM call's budget hold in the same statement.
_FINISH_STEP_SPENT = to_postgres(f"{FINISH_STEP_SPENT} RETURNING {STEP_COLS_NO_OUTPUT}")


class PgDb(DbBase):
    """The connection layer of one PostgreSQL database: its pool, and the threads that
    commit the runs' write streams."""

    _dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], int] | None = None,
        access: Access = Access.CREATE,
    ) -> None:
        self.target = parse_url(url)
        self.url = self.target.display
        self.access = access
        # Milliseconds since the epoch for step times; tests pass a fixed clock. Leases use
        # the database server's clock instead (postgres.rows.NOW_MS).
        super().__init__(clock or now_ms)
        conn = connect(self.target)
        try:
            if access is not Access.CREATE:
                # Looked at first, in a read-only transaction: a reading command creates no
                # schema and no table (access.py).
                with conn.transaction():
                    conn.execute("SET TRANSACTION READ ONLY")
                    check_found(self.url, postgres_history(conn, self.url), access)
            if access is not Access.READ:
                migrate_postgres(conn, where=self.url, schema=self.target.schema)
            self.schema = str(conn.execute("SELECT current_schema()").fetchone()[0])  # type: ignore[index]
        except psycopg.Error as e:
            raise StoreError(f"{self.url} is not a usable xclaw database: {e}") from e
        finally:
            conn.close()
        self._pool = Pool(self.target, read_only=access is Access.READ)
        # The threads that commit runs' write streams (one batch of one stream each).
        self._streams = ThreadPoolExecutor(
            self.target.pool_max, thread_name_prefix="xclaw-pg-stream"
        )
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._streams.shutdown(wait=True)
        self._pool.close()

    @property
    def commits(self) -> int:
        return self._pool.commits

    @property
    def writer_busy_s(self) -> float | None:
        return None  # a pool of connections: no one writer to saturate

    def write_stream(self, lease: Lease | None = None) -> WriteStream:
        """Ordered writes for one run: its queued writes as one transaction of the pool at a
        time, on a worker thread (stream.SerialBatches); other runs commit in parallel."""
        if self._closed:
            raise StoreError(f"the store for {self.url} is closed")
        pool = self._pool
        return WriteStream(
            SerialBatches(pool.run_units, self._streams),
            self.bodies,
            lease,
        )

    # --- plumbing ---------------------------------------------------------------------------
    def _write(self, fn: Callable[[psycopg.Connection], T], kind: Kind) -> T:
        if self._closed:
            raise StoreError(f"the store for {self.url} is closed")
        if self.access is Access.READ:
            raise StoreError(f"{self.url} was opened read-only: nothing may be written to it")
        return self._pool.run(fn, sync_for(kind))

    def _read(self, fn: Callable[[psycopg.Connection], T], *, snapshot: bool = False) -> T:
        """Single statements run in autocommit; `snapshot` gives several one consistent view."""
        if self._closed:
            raise StoreError(f"the store for {self.url} is closed")
        return self._pool.read(fn, snapshot=snapshot)


class PgRecord(RecordRole):
    """The record on PostgreSQL: the shared record (store/steps/record.py) and PostgreSQL's
    bodies of a step's write."""

    def _insert_step_tx(
        self,
        session_id: str,
        step: NewStep,
        status: StepStatus,
        output_data: Any,
        error_message: str | None,
        lease: Lease | None,
        hold: Hold | None = None,
    ) -> Callable[[Any], Step]:
        insert = self._insert_locked_tx(session_id, step, status, output_data, error_message, hold)
        worker = None if lease is None else lease.owner

        def tx(conn: psycopg.Connection) -> Step:
            current, seq, _ = lock_session(conn, session_id, lease)
            return insert(
                conn,
                current,
                seq,
                worker,
                lambda: approval_pending(self._dialect, conn, session_id),
            )

        return tx

    def _insert_locked_tx(
        self,
        session_id: str,
        step: NewStep,
        status: StepStatus,
        output_data: Any,
        error_message: str | None,
        hold: Hold | None = None,
    ) -> Callable[[psycopg.Connection, Status, int, str | None, Callable[[], bool]], Step]:
        """The step inserted (one statement, with the session's move) once the session row
        is locked and its status `current` and next number `seq` read; `worker` writes it,
        and an LLM call's budget `hold` is in its row."""
        moves = moves_session(step, status)
        error_message = pg_text(error_message)
        # The JSON columns encoded here; the row (number, parent, times) made in the
        # transaction, its columns as model.Step declares them (store/steps/columns.py).
        encoded = encoded_json(step, output_data, pg_json)

        def tx(
            conn: psycopg.Connection,
            current: Status,
            seq: int,
            worker: str | None,
            pending: Callable[[], bool],
        ) -> Step:
            parent = self._parent_id(conn, session_id, step.parent_step_id)
            event = event_of_new_step(current, step, pending) if moves else None
            now = self._now()
            row = new_step(session_id, seq, parent, step, status, output_data, error_message, now)
            step_row = dict(zip(_STEP_NAMES, STEPS.params(row, encoded, pg_text), strict=True))
            step_row["worker"] = worker
            if hold is not None:  # an LLM call's budget hold, in its own row
                held = (hold.tokens, hold.usd, hold.owner, hold.day)
                step_row |= zip(HOLD_COLUMNS, held, strict=True)
            # A user_input step is the new instruction a cancel or rollback was waiting for.
            write_status(
                conn,
                session_id,
                current,
                event,
                now,
                next_seq=seq + 1,
                instruction=step.step_type is StepType.USER_INPUT,
                with_step=(_INSERT_STEP_CTE if hold is None else _INSERT_HELD_STEP_CTE, step_row),
            )
            return row

        return tx

    def _open_turn_tx(
        self, w: OpenTurn
    ) -> Callable[[Any], tuple[Lease | None, list[Step], Step | None]]:
        """A turn opened in two round trips where it can be (postgres/opening.py)."""
        if w.create or w.member:
            return super()._open_turn_tx(w)
        return open_turn_tx(self, w, self._insert_locked_tx)

    def _finish_step_tx(
        self,
        session_id: str,
        seq: int,
        ref: int | str,
        done: Completion,
        wanted: Status | None,
        lease: Lease | None,
        spent: Spent | None = None,
    ) -> Callable[[Any], Step]:
        values = Table.values(done, FINISH_COLUMNS, pg_json, pg_text)
        output_data = done.output_data
        # An LLM call's budget hold settled in the same statement.
        sql, settle = (
            (_FINISH_STEP, ()) if spent is None else (_FINISH_STEP_SPENT, (spent.tokens, spent.usd))
        )

        def tx(conn: psycopg.Connection) -> Step:
            # The session row first: two approvals answered at once must not both see the
            # other one still pending (and the fence is checked here).
            current, _, _ = lock_session(conn, session_id, lease)
            row = conn.execute(sql, (*values, self._now(), *settle, session_id, seq)).fetchone()
            if row is None:
                raise not_running(self._dialect, conn, session_id, seq, ref)
            step = row_to_finished_step(row, output_data)
            event = event_of_answer(
                wanted,
                step,
                lambda: current,
                lambda: approval_pending(self._dialect, conn, session_id),
            )
            if event is not None:
                write_status(conn, session_id, current, event, self._now())
            return step

        return tx


class PostgresStore(StoreRoles[PgDb]):
    """The shared store: its roles, each over one PostgreSQL database's pool (PgDb)."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], int] | None = None,
        access: Access = Access.CREATE,
    ) -> None:
        db = PgDb(url, clock=clock, access=access)
        snapshots = SnapshotMethods(db)
        leases = PgLeases(db)
        record = PgRecord(db, leases=leases, snapshots=snapshots)
        leases.drive_with(record)
        budgets, schedules = BudgetMethods(db), ScheduleMethods(db)
        db.bodies = TxBodies(record, leases, budgets, snapshots, schedules)
        super().__init__(
            db,
            url=db.url,
            record=record,
            snapshots=snapshots,
            leases=leases,
            teams=TeamMethods(db, record),
            budgets=budgets,
            schedules=schedules,
        )
        self._leases_role, self._snapshots_role = leases, snapshots
        self.target = db.target
        self.schema = db.schema

    def fsck_access(self) -> FsckAccess:
        from xclaw.store.postgres.fsck import PgFsck

        return PgFsck(self.db)

    def open_bus(
        self,
        on_message: Callable[[dict[str, Any]], None],
        wants: Callable[[str], bool] | None = None,
    ) -> PgBus:
        """Messages between the workers on this database (LISTEN/NOTIFY); see postgres.bus."""
        from xclaw.store.postgres.bus import PgBus

        return PgBus(self.db.target, self.db.schema, on_message, wants)

    def close(self) -> None:
        """Release the workers' presence, close the object store and the pool."""
        if self.db.closed:
            return
        self._leases_role.close_presence()
        self._snapshots_role.close_blobs()
        self.db.close()
