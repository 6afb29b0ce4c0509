"""A small MCP server (the official SDK, stdio) keeping a ledger of payments in a SQLite file
(`LEDGER_DB`): `record_payment` inserts a row and answers its id, `delete_payment` removes one
by id (the compensation xclaw.yaml configures), `find_payment` says whether a reference is
recorded (the settle check). With `--pause-file PATH`, while that file exists,
`record_payment` waits after recording (a test kills xclaw in between). `delete_payment` with `fail: true` fails, as a compensation
the remote side refuses. Every call is appended to `CALL_LOG` when set.

Run: `python ledger_server.py` (as an `mcp_servers` command)."""

from __future__ import annotations

import os
import sqlite3
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("ledger")
# `--pause-file PATH`: while that file exists, record_payment waits a minute after recording.
PAUSE_FILE = sys.argv[sys.argv.index("--pause-file") + 1] if "--pause-file" in sys.argv else None


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["LEDGER_DB"], timeout=10, isolation_level=None)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, ref TEXT UNIQUE, amount INTEGER)"
    )
    return conn


def _log(line: str) -> None:
    path = os.environ.get("CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@server.tool()
def record_payment(ref: str, amount: int) -> dict[str, object]:
    """Record a payment under a reference; answers its id."""
    _log(f"record_payment {ref}")
    with _db() as conn:
        cur = conn.execute("INSERT INTO payments (ref, amount) VALUES (?, ?)", (ref, amount))
        new = cur.lastrowid
    if PAUSE_FILE and os.path.exists(PAUSE_FILE):  # a test kills xclaw in this window
        time.sleep(60)
    return {"id": new, "ref": ref}


@server.tool()
def delete_payment(id: int, fail: bool = False) -> str:
    """Delete a payment by id."""
    _log(f"delete_payment {id}")
    if fail:
        raise ValueError("the ledger refuses to delete it")
    with _db() as conn:
        gone = conn.execute("DELETE FROM payments WHERE id = ?", (id,)).rowcount
    return f"deleted {gone} payment(s)"


@server.tool()
def find_payment(ref: str) -> dict[str, object]:
    """Whether a payment with this reference is recorded."""
    _log(f"find_payment {ref}")
    with _db() as conn:
        row = conn.execute("SELECT id FROM payments WHERE ref = ?", (ref,)).fetchone()
    return {"found": row is not None}


if __name__ == "__main__":
    server.run()
