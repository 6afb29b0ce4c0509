"""[demo] The demo's outside system: a small ledger database (SQLite, outside every workspace), and
the Python tool that records a payment in it — declaring how a rollback reverses one
(`reverse_payment`, a delete) and how a crash's outcome is found (`payment_recorded`).
`xclaw demo` lists it in its xclaw.yaml (`tools: ['xclaw.demo.ledger:record_payment']`); the
ledger's file is `XCLAW_DEMO_LEDGER`, else `ledger.db` under XCLAW_HOME."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from xclaw.tools.python_tools import tool

SCHEMA = "CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, payee TEXT, amount INTEGER)"


def ledger_path() -> Path:
    given = os.environ.get("XCLAW_DEMO_LEDGER")
    if given:
        return Path(given)
    return Path(os.environ.get("XCLAW_HOME") or Path.home() / ".xclaw") / "ledger.db"


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(ledger_path(), timeout=30, isolation_level=None)
    conn.execute(SCHEMA)
    return conn


def payments() -> list[tuple[int, str, int]]:
    """Every payment the ledger holds: (id, payee, amount)."""
    conn = _connect()
    try:
        return [(int(r[0]), str(r[1]), int(r[2])) for r in conn.execute("SELECT * FROM payments")]
    finally:
        conn.close()


def reverse_payment(input: dict[str, Any], output: dict[str, Any]) -> str:
    """The compensation: the payment the call recorded (its id, from the call's output)."""
    conn = _connect()
    try:
        gone = conn.execute("DELETE FROM payments WHERE id = ?", (output["id"],)).rowcount
    finally:
        conn.close()
    return f"payment #{output['id']} to {input['payee']} reversed ({gone} row deleted)"


def payment_recorded(input: dict[str, Any]) -> bool:
    """The settle check: a payment to that payee of that amount is in the ledger."""
    conn = _connect()
    try:
        row = conn.execute(
            "SELECT 1 FROM payments WHERE payee = ? AND amount = ?",
            (input["payee"], input["amount"]),
        ).fetchone()
    finally:
        conn.close()
    return row is not None


@tool(compensate=reverse_payment, compensate_idempotent=True, settle=payment_recorded)
def record_payment(payee: str, amount: int) -> dict[str, Any]:
    """Record a payment in the ledger (an outside system: a rollback reverses it)."""
    conn = _connect()
    try:
        new = conn.execute(
            "INSERT INTO payments (payee, amount) VALUES (?, ?)", (payee, amount)
        ).lastrowid
    finally:
        conn.close()
    return {"id": new, "payee": payee, "amount": amount}
