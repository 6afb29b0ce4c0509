"""[store/sqlite] SQLiteStore: the embedded, default implementation of the Store protocol — its
roles (store/roles.py) over SqliteDb, the connection layer of one SQLite file.

Every write runs on the database's one writer thread (xclaw.store.sqlite.writer), which
groups whatever is queued into one commit; a run's ordered writes go there as a WriteStream. Every read runs on a per-thread read-only
connection; in WAL mode readers see the last commit and never wait for the writer.
Every status write is rows.write_status, which asks model.next_status (checked transitions).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import StoreError
from xclaw.security.private_files import private_sqlite
from xclaw.store.access import Access, check_found
from xclaw.store.budgets.sql import BudgetMethods
from xclaw.store.common import (
    encoded_json,
    event_of_answer,
    event_of_new_step,
    moves_session,
    new_step,
)
from xclaw.store.dialect import SQLITE
from xclaw.store.leases import Lease, check_lease_for
from xclaw.store.migrations import migrate_sqlite, sqlite_history
from xclaw.store.roles import DbBase, StoreRoles
from xclaw.store.schedules.sql import ScheduleMethods
from xclaw.store.snapshots.sql import SnapshotMethods
from xclaw.store.sqlite.leases import (
    SqliteLeases,
    check_fence,
    fenced_session_state,
    take_known_seq,
    take_seq_unmoved,
)
from xclaw.store.sqlite.probe import probe_sqlite
from xclaw.store.sqlite.writer import Writer, connect, disk_full, retry_while_busy
from xclaw.store.steps.columns import Table
from xclaw.store.steps.model import (
    Completion,
    NewStep,
    Status,
    Step,
    StepStatus,
    StepType,
    full_step_id,
    is_approval,
    parse_step_ref,
)
from xclaw.store.steps.record import RecordRole
from xclaw.store.steps.rows import (
    FINISH_COLUMNS,
    FINISH_STEP,
    FINISH_STEP_SPENT,
    HOLD_COLUMNS,
    STEP_COLS_NO_OUTPUT,
    STEPS,
    dump_json,
    now_ms,
    row_to_finished_step,
    session_state,
    write_status,
)
from xclaw.store.steps.sql import approval_pending, not_running
from xclaw.store.steps.stream import WriteStream
from xclaw.store.steps.writes import Hold, Kind, Spent, TxBodies, sync_for
from xclaw.store.teams.sql import TeamMethods

if TYPE_CHECKING:
    from xclaw.store.fsck_rows import FsckAccess

T = TypeVar("T")


class SqliteDb(DbBase):
    """The connection layer of one SQLite file (WAL): the one group-commit writer thread
    every write runs on, and a read-only connection per reading thread."""

    _dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], int] | None = None,
        access: Access = Access.CREATE,
    ) -> None:
        if str(path) in ("", ":memory:"):
            raise ValueError("SQLiteStore needs a file path (several connections share it)")
        self.path = Path(path).expanduser()
        self.url = str(self.path)
        self.access = access
        super().__init__(clock or now_ms)
        # What is there decides what may be done, before anything is written (access.py).
        check_found(self.url, probe_sqlite(self.path, self.url), access)
        self._writer: Writer | None = None
        if access is not Access.READ:
            self._writer = self._open_writer()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

    def _open_writer(self) -> Writer:
        """The write connection: the file created (or made) 0600 first — it is xclaw's, new
        or checked by probe_sqlite — then switched to WAL and migrated."""
        try:
            # 0600 before SQLite opens it: its WAL and SHM then get the same mode.
            private_sqlite(self.path)
        except OSError as e:
            raise StoreError(f"cannot open database {self.url}: {e}") from e
        conn = connect(self.url)

        def open_wal_and_migrate() -> None:
            # Another program's tables are refused under the write lock (migrate_sqlite)
            # before the WAL switch, which would change its file.
            conn.execute("BEGIN IMMEDIATE")
            try:
                sqlite_history(conn, self.url)
            finally:
                conn.execute("ROLLBACK")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.url}: cannot switch the database to WAL mode ({mode})")
            migrate_sqlite(conn, where=self.url)

        try:
            retry_while_busy(open_wal_and_migrate, self.url)
        except sqlite3.DatabaseError as e:
            conn.close()
            if (full := disk_full(e, self.url)) is not None:
                raise full from e  # a new database's tables, or an upgrade, need room too
            raise StoreError(f"{self.url} is not a usable xclaw database: {e}") from e
        except BaseException:
            conn.close()
            raise
        return Writer(conn, where=self.url)

    @property
    def read_only(self) -> bool:
        """Opened by a reading command: nothing is ever written (access.py)."""
        return self._writer is None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Finish every queued write, then close the write and read connections."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()

    @property
    def commits(self) -> int:
        """Transactions committed by the writer so far (group commit makes it < writes)."""
        return 0 if self._writer is None else self._writer.commits

    @property
    def writer_busy_s(self) -> float:
        """Seconds the writer has spent running transactions: over wall time, how close the
        one writer is to saturation (GET /api/health, bench/gateway_bench.py)."""
        return 0.0 if self._writer is None else self._writer.busy_s

    def write_stream(self, lease: Lease | None = None) -> WriteStream:
        """Ordered writes for one run, committed by the writer thread (sqlite.writer)."""
        if self._closed:
            raise StoreError(f"the store for {self.url} is closed")
        return WriteStream(self._writable().send, self.bodies, lease)

    @property
    def writer_thread(self) -> threading.Thread:
        """The one thread that writes this database (tests check that nothing else does)."""
        return self._writable().thread

    # --- plumbing ---------------------------------------------------------------------------
    def _write(self, fn: Callable[[sqlite3.Connection], T], kind: Kind) -> T:
        return self._writable().submit(fn, sync_for(kind))

    def _writable(self) -> Writer:
        if self._writer is None:
            raise StoreError(f"{self.url} was opened read-only: nothing may be written to it")
        return self._writer

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.url, read_only=True, existing=self.read_only)
            with self._readers_lock:
                if self._closed:
                    conn.close()
                    raise StoreError(f"the store for {self.url} is closed")
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    def _read(self, fn: Callable[[sqlite3.Connection], T], *, snapshot: bool = False) -> T:
        """Run fn on this thread's reader; `snapshot` wraps several statements in one read
        transaction so they see the same commit."""
        if self._closed:
            raise StoreError(f"the store for {self.url} is closed")
        conn = self._reader()

        def attempt() -> T:
            if not snapshot:
                return fn(conn)
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")

        try:
            return retry_while_busy(attempt, self.url)
        except sqlite3.Error as e:
            raise StoreError(f"database error on {self.url}: {e}") from e


class SqliteRecord(RecordRole):
    """The record on SQLite: the shared record (store/steps/record.py) and SQLite's bodies
    of a step's write, the path nearly every write takes."""

    def __init__(self, db: SqliteDb, *, leases: SqliteLeases, snapshots: SnapshotMethods) -> None:
        super().__init__(db, leases=leases, snapshots=snapshots)
        # session id -> the step number this store expects to take next for it (the one
        # after the last it took): a guess, checked by the UPDATE that takes it
        # (take_known_seq), never trusted. Only the writer's transactions touch it.
        self._next_seqs: dict[str, int] = {}

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
        moves = moves_session(step, status)
        # A parent link must name an existing step of the same session: checked by the
        # INSERT itself (the parent's foreign key; its id names the session), no statement
        # of its own.
        parent_seq = (
            None if step.parent_step_id is None else parse_step_ref(step.parent_step_id, session_id)
        )
        parent = None if parent_seq is None else full_step_id(session_id, parent_seq)
        # The JSON columns encoded here; the row (number, times) made in the transaction, its
        # columns as model.Step declares them (store/steps/columns.py).
        encoded = encoded_json(step, output_data, dump_json)
        worker = None if lease is None else lease.owner  # who wrote it, under its lease
        # An LLM call's budget hold, in its own row (no statement of its own).
        insert, held = (
            (_INSERT_STEP, ())
            if hold is None
            else (_INSERT_HELD_STEP, (hold.tokens, hold.usd, hold.owner, hold.day))
        )

        # Nearly every step leaves the status as it is: a running LLM or tool call of a
        # Running session (model.next_status(Running, RUN_STARTED) is Running), or a finished
        # step other than the user's message. Those take their number in one statement.
        unmoved = not moves or (
            step.step_type is not StepType.USER_INPUT and not is_approval(step.step_type, step.name)
        )

        next_seqs = self._next_seqs

        def tx(conn: sqlite3.Connection) -> Step:
            now = self._now()
            taken = None
            if unmoved:
                expected = next_seqs.get(session_id)
                if expected is not None and take_known_seq(
                    conn, session_id, lease, now, expected, running=moves
                ):
                    taken = expected
                else:  # not known, or not what the session says: read from the UPDATE
                    taken = take_seq_unmoved(conn, session_id, lease, now, running=moves)
            if taken is not None:
                seq = taken
            else:
                current, seq, _ = fenced_session_state(conn, session_id, lease)
                event = (
                    event_of_new_step(
                        current, step, lambda: approval_pending(self._dialect, conn, session_id)
                    )
                    if moves
                    else None
                )
                # Checked before the step row is written; the same transaction, so all or
                # nothing. A user_input step is the new instruction a cancel or rollback was
                # waiting for.
                write_status(
                    conn,
                    session_id,
                    current,
                    event,
                    now,
                    next_seq=seq + 1,
                    instruction=step.step_type is StepType.USER_INPUT,
                )
            if len(next_seqs) >= _NEXT_SEQS_KEPT:
                next_seqs.clear()
            # Set before the row is written: if this transaction is rolled back, the guess
            # is one too high, and the next step's UPDATE says so.
            next_seqs[session_id] = seq + 1
            row = new_step(session_id, seq, parent, step, status, output_data, error_message, now)
            params = STEPS.params(row, encoded, SQLITE.text)
            params.append(worker)
            params.extend(held)
            try:
                conn.execute(insert, params)
            except sqlite3.IntegrityError:
                # The parent's foreign key refused the row: no such step in this session
                # (its id is the session's and its number: model.full_step_id).
                if parent_seq is None or step.parent_step_id is None:
                    raise
                self._dialect.require_step(conn, session_id, parent_seq, step.parent_step_id)
                raise
            return row

        return tx

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
        check_lease_for(lease, session_id)
        values = [
            *Table.values(done, FINISH_COLUMNS, dump_json, SQLITE.text),
            self._now(),
            # An LLM call's budget hold settled in the same statement.
            *(() if spent is None else (spent.tokens, spent.usd)),
            session_id,
            seq,
        ]
        # The fence rides on the UPDATE (one statement per completion); no row: find out why.
        plain, fenced = _FINISHES[spent is not None]
        sql, params = (
            (plain, values) if lease is None else (fenced, [*values, session_id, lease.token])
        )
        output_data = done.output_data

        key = (session_id, seq)

        def tx(conn: sqlite3.Connection) -> Step:
            if conn.execute(sql, params).rowcount != 1:
                check_fence(conn, session_id, lease)
                raise not_running(self._dialect, conn, session_id, seq, ref)
            # The row read back by a SELECT of its own: an UPDATE ... RETURNING gathers its
            # rows in a temporary table first, which costs SQLite more than the second
            # statement does.
            step = row_to_finished_step(conn.execute(_FINISHED_STEP, key).fetchone(), output_data)
            event = event_of_answer(
                wanted,
                step,
                lambda: session_state(conn, session_id)[0],
                lambda: approval_pending(self._dialect, conn, session_id),
            )
            if event is not None:
                current, _, _ = session_state(conn, session_id)
                write_status(conn, session_id, current, event, self._now())
            return step

        return tx


# The step's row, every column as model.Step declares it, and the writing worker. VALUES,
# not a SELECT guarded by a look at the parent's row: an INSERT whose SELECT reads the table
# it inserts into is run through a temporary table (~46,000 CPU instructions, ~6 % of a step); the
# parent's foreign key checks the same (SQLite's connections keep foreign keys on).
_INSERT_STEP = SQLITE.sql(STEPS.insert("worker"))
# How many sessions' next step numbers a store keeps (SqliteRecord._next_seqs): a server's
# sessions at once, with room; past it the guesses start again from nothing.
_NEXT_SEQS_KEPT = 4096

# ... with an LLM call's budget hold in its row.
_INSERT_HELD_STEP = SQLITE.sql(STEPS.insert("worker", *HOLD_COLUMNS))

_FINISH_STEP = SQLITE.sql(FINISH_STEP)
_FINISH_STEP_FENCED = SQLITE.sql(
    f"{FINISH_STEP} AND (SELECT lease_token FROM sessions WHERE session_id=?) IS ?"
)
# (plain, fenced), without and with a budget hold's settlement.
_FINISHES = {
    False: (_FINISH_STEP, _FINISH_STEP_FENCED),
    True: (
        SQLITE.sql(FINISH_STEP_SPENT),
        SQLITE.sql(
            f"{FINISH_STEP_SPENT} AND (SELECT lease_token FROM sessions WHERE session_id=?) IS ?"
        ),
    ),
}
# A finished step's row, read back in the completion's transaction (output_data read as NULL:
# the caller gave it).
_FINISHED_STEP = f"SELECT {STEP_COLS_NO_OUTPUT} FROM traces WHERE session_id=? AND seq=?"


class SQLiteStore(StoreRoles[SqliteDb]):
    """The embedded store: its roles, each over one SQLite file's writer thread and readers
    (SqliteDb)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], int] | None = None,
        access: Access = Access.CREATE,
    ) -> None:
        db = SqliteDb(path, clock=clock, access=access)
        snapshots = SnapshotMethods(db)
        leases = SqliteLeases(db)
        record = SqliteRecord(db, leases=leases, snapshots=snapshots)
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
        self.path = db.path
        self._leases_role, self._snapshots_role = leases, snapshots

    @property
    def read_only(self) -> bool:
        """Opened by a reading command: nothing is ever written (access.py)."""
        return self.db.read_only

    @property
    def writer_thread(self) -> threading.Thread:
        """The one thread that writes this database (tests check that nothing else does)."""
        return self.db.writer_thread

    def fsck_access(self) -> FsckAccess:
        from xclaw.store.sqlite.fsck import SqliteFsck

        return SqliteFsck(self.db)

    def close(self) -> None:
        """Release the workers' presence, close the object store, finish every queued
        write, then close the write and read connections."""
        if self.db.closed:
            return
        self._leases_role.close_presence()
        self._snapshots_role.close_blobs()
        self.db.close()
