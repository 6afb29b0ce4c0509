"""A real outside system for the effects tests: a payments table in a SQLite file or in the
local PostgreSQL server, and a Python tool module (written into the test's directory, listed in
its xclaw.yaml) whose `record_payment` inserts a row, declares `undo_payment` (a delete) as its
compensation and `payment_recorded` (a lookup by reference) as its settle check.

The tool pauses where the environment says (`PAY_PAUSE_BEFORE`, `PAY_PAUSE_AFTER`, seconds),
so a test can SIGKILL the process before the effect, or between the effect and its recording;
`UNDO_PAUSE` pauses inside the compensation (of the payment `UNDO_PAUSE_REF` names, or each),
after its delete (the delete by id is
idempotent: declared so on `record_payment`, not on `record_payment_strict`), and
`UNDO_FAIL=REF` makes the compensation of that payment fail (only while the file
`UNDO_FAIL_WHILE` names exists, when that is set: a process outliving the failure retries).
Every payment made and every row a compensation deleted is appended to the file `PAY_LOG`
names, so a test counts how often each really happened; a deleted row is also noted in the
table `<table>_undone` in the delete's own transaction (`Ledger.undone`), for a test that
kills at any moment."""

from __future__ import annotations

import os
import secrets
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

TOOL_MODULE = '''
import os
import sqlite3
import time

import xclaw

URL = os.environ["LEDGER_URL"]
TABLE = os.environ.get("LEDGER_TABLE", "payments")


def _connect():
    if URL.startswith("postgresql://"):
        import psycopg

        return psycopg.connect(URL, autocommit=True)
    return sqlite3.connect(URL, timeout=30, isolation_level=None)


def _sql(text):
    return text.replace("?", "%s") if URL.startswith("postgresql://") else text


def _log(line):
    path = os.environ.get("PAY_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\\n")
            f.flush()
            os.fsync(f.fileno())


def _pause(name):
    seconds = float(os.environ.get(name) or 0)
    if seconds:
        time.sleep(seconds)


def _refuses(ref):
    locked = os.environ.get("UNDO_FAIL_WHILE")
    return os.environ.get("UNDO_FAIL") == ref and (not locked or os.path.exists(locked))


def _undo(conn, ref, row_id):
    gone = conn.execute(_sql(f"DELETE FROM {TABLE} WHERE id = ?"), (row_id,)).rowcount
    if gone:
        conn.execute(_sql(f"INSERT INTO {TABLE}_undone (ref) VALUES (?)"), (ref,))
    return gone


def undo_payment(input, output):
    if _refuses(input["ref"]):
        raise RuntimeError("the ledger refuses: payment is locked by an audit")
    conn = _connect()
    try:
        # The delete and its note in {TABLE}_undone commit together: a kill at any moment
        # leaves both or neither (the log line below can be lost to a kill after the commit).
        if URL.startswith("postgresql://"):
            with conn.transaction():
                gone = _undo(conn, input["ref"], output["id"])
        else:
            conn.execute("BEGIN IMMEDIATE")
            gone = _undo(conn, input["ref"], output["id"])
            conn.execute("COMMIT")
    finally:
        conn.close()
    if gone:
        _log(f"undo {input['ref']}")
    if os.environ.get("UNDO_PAUSE_REF", input["ref"]) == input["ref"]:
        _pause("UNDO_PAUSE")
    return f"payment {output['id']} ({input['ref']}) reversed: {gone} row(s) deleted"


def payment_recorded(input):
    conn = _connect()
    try:
        row = conn.execute(_sql(f"SELECT id FROM {TABLE} WHERE ref = ?"), (input["ref"],)).fetchone()
    finally:
        conn.close()
    if row is None:
        return {"done": False}
    return {"done": True, "output": {"id": row[0], "ref": input["ref"]}}


@xclaw.tool(compensate=undo_payment, compensate_idempotent=True, settle=payment_recorded)
def record_payment(ref: str, amount: int) -> dict:
    """Record a payment in the ledger."""
    _pause("PAY_PAUSE_BEFORE")
    conn = _connect()
    try:
        if URL.startswith("postgresql://"):
            new = conn.execute(
                f"INSERT INTO {TABLE} (ref, amount) VALUES (%s, %s) RETURNING id", (ref, amount)
            ).fetchone()[0]
        else:
            new = conn.execute(
                f"INSERT INTO {TABLE} (ref, amount) VALUES (?, ?)", (ref, amount)
            ).lastrowid
    finally:
        conn.close()
    _log(f"pay {ref}")
    _pause("PAY_PAUSE_AFTER")
    return {"id": new, "ref": ref}


@xclaw.tool
def record_payment_unchecked(ref: str, amount: int) -> dict:
    """The same effect with nothing declared: irreversible, its outcome unknown after a crash."""
    return record_payment(ref, amount)


@xclaw.tool(compensate=undo_payment)
def record_payment_strict(ref: str, amount: int) -> dict:
    """The same, its compensation not declared idempotent: one cut short goes to a person."""
    return record_payment(ref, amount)
'''


class Ledger:
    """The payments table: in `path` (SQLite) or, with `pg_url`, a table of its own in the
    local PostgreSQL server (dropped by `close`)."""

    def __init__(self, tmp: Path, pg_url: str | None = None) -> None:
        self.tmp = tmp
        self.pg_url = pg_url
        self.table = f"payments_{secrets.token_hex(4)}" if pg_url else "payments"
        self.url = pg_url or str(tmp / "ledger.db")
        self.log = tmp / "pay.log"
        self._run(
            f"CREATE TABLE {self.table} (id {'serial' if pg_url else 'INTEGER'} PRIMARY KEY, "
            "ref TEXT, amount INTEGER)"
        )
        self._run(f"CREATE TABLE {self.table}_undone (ref TEXT)")

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.pg_url:
            import psycopg

            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                cur = conn.execute(sql.replace("?", "%s"), params)
                return cur.fetchall() if cur.description else []
        conn = sqlite3.connect(self.url, timeout=30, isolation_level=None)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def refs(self) -> list[str]:
        return [r[0] for r in self._run(f"SELECT ref FROM {self.table} ORDER BY id")]

    def undone(self) -> list[str]:
        """The payments a compensation deleted, one entry per deleted row, committed with
        the delete (unlike `calls`' log line, written just after it)."""
        return sorted(r[0] for r in self._run(f"SELECT ref FROM {self.table}_undone"))

    def calls(self) -> list[str]:
        """What the tool really did, in order: `pay REF`, `undo REF`."""
        return self.log.read_text().split("\n")[:-1] if self.log.exists() else []

    def env(self) -> dict[str, str]:
        return {"LEDGER_URL": self.url, "LEDGER_TABLE": self.table, "PAY_LOG": str(self.log)}

    def install(self, directory: Path, *, extra_yaml: str = "") -> str:
        """The tool module in `directory` and an xclaw.yaml listing it; returns its name."""
        name = f"ledger_tools_{secrets.token_hex(4)}"
        (directory / f"{name}.py").write_text(textwrap.dedent(TOOL_MODULE))
        (directory / "xclaw.yaml").write_text(
            f"tools: ['{name}:record_payment', '{name}:record_payment_unchecked', "
            f"'{name}:record_payment_strict']\n" + extra_yaml
        )
        return name

    def close(self) -> None:
        if self.pg_url:
            self._run(f"DROP TABLE IF EXISTS {self.table}")
            self._run(f"DROP TABLE IF EXISTS {self.table}_undone")


def pay(ref: str, amount: int = 10, tool: str = "record_payment") -> dict[str, Any]:
    """A scripted model's call of the tool."""
    return {"name": tool, "input": {"ref": ref, "amount": amount}}


def pg_url() -> str | None:
    return os.environ.get("XCLAW_TEST_PG_URL")
