"""A database that already holds a credential — written by an older version, or before the
secret was set, or imported — still shows it to no client: every frame, API answer, export
and command-line listing is redacted as it leaves, and `xclaw import` redacts on the way in."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.gateway.harness import Client, Server, clean_env, write_script, xclaw_cmd
from tests.writes import finish
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, Status, StepType
from xclaw.store.steps.writes import AddStep, BeginStep

pytestmark = pytest.mark.slow

KEY = "late-secret-0a1b2c3d4e5f"


def old_record(db: Path) -> str:
    """A session as a version without this redaction could have written it."""
    with SQLiteStore(db) as store:
        sid = store.record.create_session(title=f"about {KEY}").session_id
        user = store.record.write(
            AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", f"use {KEY}"))
        )
        llm = store.record.write(
            BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "script:x", {}, user.step_id))
        )
        store.record.write(
            finish(
                sid,
                llm.seq,
                output_data={
                    "text": f"sure {KEY}",
                    "tool_calls": [{"id": f"c_{KEY}", "name": f"t_{KEY}", "input": {"k": KEY}}],
                },
            )
        )
        tool = store.record.write(
            AddStep(
                session_id=sid,
                step=NewStep(
                    StepType.TOOL_CALL, f"t_{KEY}", {"k": KEY}, llm.step_id, call_id=f"c_{KEY}"
                ),
                output_data=f"Not run: unknown tool 't_{KEY}'",
                error_message=f"unknown tool 't_{KEY}'",
            )
        )
        assert tool.name == f"t_{KEY}"
        last = store.record.write(
            BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "script:x", {}, user.step_id))
        )
        store.record.write(
            finish(
                sid, last.seq, output_data={"text": f"done {KEY}"}, session_status=Status.SUCCESS
            )
        )
    return sid


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [*xclaw_cmd(), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
    return done.stdout + done.stderr


async def test_an_older_record_reaches_no_client_unredacted(tmp_path: Path) -> None:
    root = tmp_path / "old"
    (root / "home").mkdir(parents=True)
    db = root / "home" / "xclaw.db"
    sid = old_record(db)
    server = Server(root=root, script=write_script(root / "s.json", [{"text": "hi"}]))
    base_env = server.env
    server.env = lambda: {**base_env(), "LATE_API_KEY": KEY}  # type: ignore[method-assign]
    server.start()
    try:
        c = await Client.open(server)
        await c.attach(sid)
        for command, answer in (("/steps 20", "steps"), ("/sessions", "notice")):
            await c.send({"type": "message", "sessionId": sid, "content": command})
            await c.until_type(answer)
        frames = json.dumps(c.seen, ensure_ascii=False)
        assert "[REDACTED]" in frames
        async with httpx.AsyncClient(
            base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {server.token}"}
        ) as h:
            api = ""
            for path in (
                "sessions",
                f"sessions/{sid}",
                f"sessions/{sid}/steps?n=0",
                f"sessions/{sid}/tree",
                f"sessions/{sid}/history",
                f"sessions/{sid}/export",
                f"sessions/{KEY}",  # an error that names what was asked
            ):
                api += (await h.get(f"/{path}")).text
        assert KEY not in frames and KEY not in api
    finally:
        server.kill()

    env = clean_env(LATE_API_KEY=KEY, XCLAW_HOME=str(root / "home"), XCLAW_DB=str(db))
    for args in (
        ["sessions"],
        ["sessions", "--json"],
        ["sessions", "late"],
        ["steps", sid],
        ["trace", sid, "--json"],
        ["export", sid],
        ["export", "--all", "--json"],
        ["fsck"],
    ):
        out = cli(env, *args)
        assert KEY not in out, (args, out)
    assert "No session matches" in cli(env, "sessions", "late-secret")  # not an oracle

    # Exported where the key is unknown, imported where it is known: redacted on the way in.
    raw = cli(clean_env(XCLAW_HOME=str(root / "home"), XCLAW_DB=str(db)), "export", sid)
    assert KEY in raw
    (tmp_path / "s.jsonl").write_text(raw)
    target = tmp_path / "target.db"
    cli({**env, "XCLAW_DB": str(target)}, "import", str(tmp_path / "s.jsonl"))
    with sqlite3.connect(target) as conn:
        rows = json.dumps(
            conn.execute("SELECT * FROM traces").fetchall()
            + conn.execute("SELECT * FROM sessions").fetchall()
        )
    assert "[REDACTED]" in rows and KEY not in rows
