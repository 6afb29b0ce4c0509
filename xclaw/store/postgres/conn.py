"""[store/postgres] PostgreSQL plumbing for PostgresStore: the URL, the connection pools, one
transaction per operation with its durability, error words, and the migration runner.

Durability per commit mirrors the SQLite policy (docs/storage.md, docs/postgres.md): write-
ahead rows, final and waiting statuses, rollback/fork/create/delete commit with
`synchronous_commit = on` (the WAL is flushed before COMMIT returns); other writes (completions,
llm_call begins, user input, renewals) commit with `synchronous_commit = off`: they survive a
crash of our process, and a crash of the database server may lose the last few hundred
milliseconds of them — never a write-ahead row, because the next durable commit flushes the
WAL up to itself, earlier commits included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pgerr
from psycopg import sql
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool, PoolTimeout

from xclaw.errors import StoreError, XclawError
from xclaw.store.migrations import LATEST_VERSION, MIGRATIONS, check_history
from xclaw.store.steps.writes import Sync

T = TypeVar("T")

DEFAULT_POOL_MAX = 16
CONNECT_TIMEOUT_S = 10
POOL_WAIT_S = 30.0
# Deadlocks and serialisation failures roll the whole transaction back: safe to run again.
_RETRYABLE = (pgerr.DeadlockDetected, pgerr.SerializationFailure, pgerr.LockNotAvailable)
_RETRIES = 5

# Advisory lock namespaces (the first int4 of the two-key form); the second key is a hash.
LOCK_MIGRATE = 0x78636C01
LOCK_WORKER = 0x78636C02


@dataclass(frozen=True, slots=True)
class PgTarget:
    """A postgresql:// URL split into what psycopg gets and what people may see."""

    conninfo: str
    display: str  # the URL without its password
    schema: str | None
    pool_max: int


def parse_url(url: str) -> PgTarget:
    """`postgresql://user[:pw]@host[:port]/db[?schema=NAME&pool_max=N&<libpq params>]`.

    `schema` keeps xclaw's tables in that schema (created if missing): several xclaw
    installations, or tests, can share one database. `pool_max` bounds this process's pool
    of relaxed connections (default 16; the durable pool gets half as many). Every other
    parameter goes to libpq as is.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(f"not a PostgreSQL URL: {url!r}")
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema: str | None = None
    pool_max = DEFAULT_POOL_MAX
    rest: list[tuple[str, str]] = []
    for key, value in params:
        if key == "schema":
            schema = value or None
        elif key == "pool_max":
            try:
                pool_max = max(1, int(value))
            except ValueError:
                raise StoreError(f"pool_max must be a number in {redact_url(url)}") from None
        else:
            rest.append((key, value))
    if schema is not None:
        rest.append(("options", f"-c search_path={schema}"))
    conninfo = urlunsplit(
        (parts.scheme, parts.netloc, parts.path, urlencode(rest, quote_via=quote), "")
    )
    return PgTarget(conninfo, redact_url(url), schema, pool_max)


def redact_url(url: str) -> str:
    parts = urlsplit(url.strip())
    netloc = parts.netloc
    if "@" in netloc:
        cred, _, host = netloc.rpartition("@")
        user = cred.split(":", 1)[0]
        netloc = f"{user}:***@{host}" if ":" in cred else f"{user}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _configure(conn: psycopg.Connection, sync: Sync = Sync.DURABLE) -> None:
    """Every connection: autocommit (we open transactions ourselves), jsonb read back as its
    text (the shared row converters decode it), and its commit durability (a pool's: the
    durable pool's commits are synced, the other's not)."""
    conn.autocommit = True
    conn.adapters.register_loader("jsonb", TextLoader)
    conn.adapters.register_loader("json", TextLoader)
    conn.execute(f"SET synchronous_commit TO {'on' if sync is Sync.DURABLE else 'off'}")


def _configure_relaxed(conn: psycopg.Connection) -> None:
    _configure(conn, Sync.RELAXED)


def _configure_read_only(conn: psycopg.Connection) -> None:
    """A reading command's connections: the server itself refuses any write on them."""
    _configure(conn, Sync.RELAXED)
    conn.execute("SET default_transaction_read_only TO on")


def connect(target: PgTarget) -> psycopg.Connection:
    """One connection outside the pool (migrations, presence locks, LISTEN)."""
    try:
        conn = psycopg.connect(target.conninfo, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to PostgreSQL at {target.display}: {_words(e)}") from e
    try:
        _configure(conn)
    except psycopg.Error as e:
        conn.close()
        raise StoreError(f"cannot set up a connection to {target.display}: {_words(e)}") from e
    return conn


def _words(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def wrap(e: BaseException, where: str) -> BaseException:
    """Our own errors pass through; database errors become a StoreError with words."""
    if isinstance(e, XclawError) or not isinstance(e, psycopg.Error):
        return e
    if isinstance(e, PoolTimeout):
        err = StoreError(
            f"no free connection to {where} within {POOL_WAIT_S:.0f} s: the database is "
            "unreachable or every pooled connection is busy (raise pool_max in the URL)"
        )
    elif isinstance(e, psycopg.OperationalError):
        err = StoreError(f"lost the connection to PostgreSQL at {where}: {_words(e)}")
    else:
        err = StoreError(f"database error on {where}: {_words(e)}")
    err.__cause__ = e
    return err


class _UnitFailed(Exception):
    """A unit raised: its transaction is rolled back (PostgreSQL aborts it at the error)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Pool:
    """Two connection pools, one per durability (so no transaction spends a round trip on
    `SET LOCAL synchronous_commit`); `run` executes one function in one transaction,
    `run_units` several callables of the store in one."""

    def __init__(self, target: PgTarget, *, read_only: bool = False) -> None:
        self.target = target
        if read_only:  # one pool, every connection read-only (access.Access.READ)
            self._relaxed = self._open(target, _configure_read_only, "xclaw-ro", target.pool_max)
            self._durable = self._relaxed
        else:
            # Durable commits are the fewer (write-ahead rows, final statuses): half the pool.
            self._durable = self._open(
                target, _configure, "xclaw-durable", max(2, target.pool_max // 2)
            )
            try:
                self._relaxed = self._open(target, _configure_relaxed, "xclaw", target.pool_max)
            except BaseException:
                self._durable.close()
                raise
        self.commits = 0

    @staticmethod
    def _open(
        target: PgTarget, configure: Callable[[psycopg.Connection], None], name: str, size: int
    ) -> ConnectionPool:
        pool = ConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=size,
            kwargs={"connect_timeout": CONNECT_TIMEOUT_S},
            configure=configure,
            open=False,
            name=name,
        )
        try:
            pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as e:
            pool.close()
            raise StoreError(f"cannot connect to PostgreSQL at {target.display}") from e
        return pool

    def close(self) -> None:
        self._durable.close()
        if self._relaxed is not self._durable:
            self._relaxed.close()

    def run(self, fn: Callable[[psycopg.Connection], T], sync: Sync) -> T:
        """fn(conn) inside BEGIN..COMMIT on a connection of the asked durability (synced:
        Sync.DURABLE, the row of its kind in store/steps/writes.py's SYNC)."""
        pool = self._durable if sync is Sync.DURABLE else self._relaxed
        return self._run(pool, fn, write=True, snapshot=False)

    def read(self, fn: Callable[[psycopg.Connection], T], *, snapshot: bool = False) -> T:
        """fn(conn) in autocommit, one round trip per statement, unless `snapshot` asks for
        one REPEATABLE READ transaction (several statements, one view)."""
        return self._run(self._relaxed, fn, write=False, snapshot=snapshot)

    def _run(
        self,
        pool: ConnectionPool,
        fn: Callable[[psycopg.Connection], T],
        *,
        write: bool,
        snapshot: bool,
    ) -> T:
        """A deadlock or serialisation failure (everything rolled back) runs it again; other
        errors reach the caller in words."""

        def attempt() -> T:
            with pool.connection(timeout=POOL_WAIT_S) as conn:
                if not write and not snapshot:
                    return fn(conn)
                with conn.transaction():
                    if snapshot:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    result = fn(conn)
                if write:
                    self.commits += 1
                return result

        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """attempt() again, with backoff, after a deadlock or serialisation failure (the
        database rolled everything back); other database errors reach the caller in words."""
        delay = 0.005
        for n in range(_RETRIES):
            try:
                return attempt()
            except _RETRYABLE as e:
                if n == _RETRIES - 1:
                    raise wrap(e, self.target.display) from e
                time.sleep(delay)
                delay *= 2
            except (psycopg.Error, PoolTimeout) as e:
                raise wrap(e, self.target.display) from e
        raise AssertionError("unreachable")

    def run_units(
        self, units: Sequence[Callable[[psycopg.Connection], Any]], sync: Sync
    ) -> list[tuple[bool, Any]]:
        """Transaction bodies of the store (a stream's writes applied, store/steps/writes.py) in one
        transaction, committed as `sync` says; one outcome per unit run, up to and
        including the first failure. PostgreSQL aborts a transaction at its first error, so a
        failing unit rolls the whole run back and the units before it run again in a new
        transaction (running a unit twice is running it once: store/steps/writes.py, point 6)."""
        pool = self._durable if sync is Sync.DURABLE else self._relaxed

        def attempt() -> tuple[list[tuple[bool, Any]], BaseException | None]:
            out: list[tuple[bool, Any]] = []
            with pool.connection(timeout=POOL_WAIT_S) as conn:
                try:
                    with conn.transaction():
                        for unit in units:
                            try:
                                out.append((True, unit(conn)))
                            except _RETRYABLE:
                                raise
                            except Exception as e:  # noqa: BLE001 - this unit's outcome
                                raise _UnitFailed(wrap(e, self.target.display)) from None
                except _UnitFailed as f:
                    return out, f.error
            self.commits += 1
            return out, None

        out, failed = self._retrying(attempt)
        if failed is None:
            return out
        done = len(out)
        head = self.run_units(units[:done], sync) if done else []
        if len(head) < done or (head and not head[-1][0]):
            return head  # failed earlier this time
        return [*head, (False, failed)]


# --- migrations --------------------------------------------------------------------------------

_VERSION_TABLE = """
    CREATE TABLE IF NOT EXISTS schema_version (
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at bigint NOT NULL
    )
"""


def postgres_history(conn: psycopg.Connection, where: str = "database") -> int | None:
    """The xclaw schema version of the connection's schema: None when there is no schema (a
    `?schema=` that does not exist), 0 when it holds no xclaw tables. A schema may hold other
    programs' tables (PostgreSQL schemas are shared by design); one holding tables named as
    xclaw's without xclaw's history, or another program's `schema_version`, is refused."""
    from xclaw.store.access import not_xclaw

    row = conn.execute("SELECT current_schema()").fetchone()
    if row is None or row[0] is None:
        return None
    found = conn.execute(
        "SELECT to_regclass('schema_version') IS NOT NULL, "
        "to_regclass('sessions') IS NOT NULL AND to_regclass('traces') IS NOT NULL, "
        "to_regclass('sessions') IS NOT NULL OR to_regclass('traces') IS NOT NULL"
    ).fetchone()
    assert found is not None
    has_history, has_core, has_any = found
    if not has_history:
        if has_any:
            raise not_xclaw(
                where,
                "its schema holds tables named as xclaw's (sessions, traces) written by "
                "something other than xclaw",
            )
        return 0
    try:
        with conn.transaction():  # a savepoint: another program's table may not have these
            rows = conn.execute("SELECT version, name FROM schema_version ORDER BY 1").fetchall()
    except psycopg.Error as e:
        raise not_xclaw(
            where,
            f"its schema_version table is not xclaw's ({_words(e)}): written by something else",
        ) from e
    version = check_history(rows, where)
    if version and not has_core:
        raise not_xclaw(where, "it records xclaw's schema but lacks its sessions and traces")
    return version


def migrate_postgres(
    conn: psycopg.Connection,
    *,
    where: str = "database",
    schema: str | None = None,
    target: int | None = None,
) -> list[int]:
    """Bring the schema up to `target` (default: the latest); return the versions applied.

    Every pending migration runs in one transaction, each with its `schema_version` row,
    under a transaction-scoped advisory lock: workers starting at once apply each migration
    exactly once, and a failure or a crash half-way leaves the version the schema had (a new
    one: no xclaw tables), never one between (PostgreSQL DDL is transactional).
    """
    from xclaw.store.access import too_new

    target = LATEST_VERSION if target is None else target
    applied: list[int] = []
    with conn.transaction():
        if schema is not None:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_MIGRATE, schema))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        if conn.execute("SELECT current_schema()").fetchone() == (None,):
            raise StoreError(
                f"{where}: no schema to create xclaw's tables in (check search_path, or "
                "add ?schema=NAME to the URL)"
            )
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (LOCK_MIGRATE,)
        )
        current = postgres_history(conn, where) or 0
        conn.execute(_VERSION_TABLE)
        if current > LATEST_VERSION:
            raise too_new(where, current)
        while current < target:
            m = MIGRATIONS[current]  # versions are 1..n without gaps (tested)
            if not m.postgres:
                raise StoreError(f"migration {m.version} ({m.name}) has no PostgreSQL text")
            try:
                with conn.transaction():  # a savepoint: the error is reported in words
                    for statement in m.postgres:
                        conn.execute(statement)
            except psycopg.Error as e:
                raise StoreError(
                    f"cannot upgrade {where} to schema version {m.version} ({m.name}): "
                    f"{_words(e)}. Is it a database written by something other than xclaw?"
                ) from e
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (%s, %s, %s)",
                (m.version, m.name, int(time.time() * 1000)),
            )
            applied.append(m.version)
            current = m.version
    return applied
