"""Rollback and settling against real outside systems besides the ledger tables
(tests/runtime/test_rollback_effects.py): an S3 bucket on SeaweedFS (an upload, undone by a
delete), an SMTP server (aiosmtpd: a message sent stays delivered — irreversible, named, and
left done only on the explicit word), and an MCP server's tools with a compensation and a
settle check configured in xclaw.yaml (tests/tools/mcp_servers/ledger_server.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port
from tests.runtime.test_crash import kill
from tests.seaweed import BUCKET, Seaweed, aws_env, running_seaweed
from tests.tools.mcp_servers.servers import ROOT
from tests.waiting import wait_until
from xclaw.errors import IrreversibleEffects
from xclaw.store.steps.model import StepStatus, StepType
from xclaw.tools.mcp.config import parse_servers
from xclaw.tools.traits import ToolPolicy

TOOLS = '''
import os
import smtplib
from email.message import EmailMessage

import boto3
import xclaw


def _s3():
    return boto3.client("s3")


def delete_upload(input, output):
    _s3().delete_object(Bucket=input["bucket"], Key=input["key"])
    return f"deleted s3://{input['bucket']}/{input['key']}"


def uploaded(input):
    try:
        _s3().head_object(Bucket=input["bucket"], Key=input["key"])
    except Exception as e:
        if "404" in str(e) or "Not Found" in str(e):
            return False
        return None
    return True


@xclaw.tool(compensate=delete_upload, compensate_idempotent=True, settle=uploaded)
def upload(bucket: str, key: str, body: str) -> dict:
    """Upload a text object."""
    _s3().put_object(Bucket=bucket, Key=key, Body=body.encode())
    return {"bucket": bucket, "key": key, "size": len(body)}


@xclaw.tool(effect="irreversible")
def send_mail(to: str, subject: str) -> str:
    """Send an email."""
    msg = EmailMessage()
    msg["From"] = "agent@example.test"
    msg["To"] = to
    msg["Subject"] = subject
    msg.set_content("sent by the agent")
    with smtplib.SMTP("127.0.0.1", int(os.environ["SMTP_PORT"]), timeout=10) as smtp:
        smtp.send_message(msg)
    return f"sent to {to}"
'''


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"outside_tools_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TOOLS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path_factory.mktemp("s3")) as w, aws_env(w):
        yield w


class Mailbox:
    """An SMTP server (aiosmtpd) on a port of its own, keeping what it delivered."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.delivered: list[str] = []
        mailbox = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                mailbox.delivered.append(envelope.content.decode(errors="replace"))
                return "250 OK"

        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()


@pytest.fixture
def mailbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Mailbox]:
    box = Mailbox()
    monkeypatch.setenv("SMTP_PORT", str(box.port))
    try:
        yield box
    finally:
        box.stop()


def first_user(h: Any, sid: str) -> str:
    return next(
        s.display_id for s in h.store.record.steps(sid) if s.step_type is StepType.USER_INPUT
    )


async def test_an_upload_is_deleted_and_a_sent_mail_stays_sent(
    make: Any, tools_module: str, weed: Seaweed, mailbox: Mailbox
) -> None:
    key = f"reports/{os.getpid()}-{id(mailbox)}.txt"
    s3 = weed.client()
    h = make(
        [
            {
                "tool_calls": [
                    {"name": "upload", "input": {"bucket": BUCKET, "key": key, "body": "q3"}}
                ]
            },
            {
                "tool_calls": [
                    {"name": "send_mail", "input": {"to": "cfo@example.test", "subject": "Q3"}}
                ]
            },
            {"text": "uploaded and mailed"},
        ],
        tools=[f"{tools_module}:upload", f"{tools_module}:send_mail"],
    )
    sid = await h.ask("upload the report and mail it")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"q3"
    assert len(mailbox.delivered) == 1
    target = first_user(h, sid)

    preview = await h.runtime.rollback_preview(sid, target)
    assert [e.tool for e in preview.to_undo] == ["upload"]
    assert [(e.tool, e.why) for e in preview.not_undone] == [("send_mail", "irreversible")]
    with pytest.raises(IrreversibleEffects, match="send_mail"):
        await h.runtime.rollback(sid, target)
    assert s3.get_object(Bucket=BUCKET, Key=key)  # nothing was done

    outcome = await h.runtime.rollback(sid, target, accept_irreversible=True)
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=BUCKET, Key=key)
    assert len(mailbox.delivered) == 1  # the message stays delivered, and the record says so
    assert [e.tool for e in outcome.not_undone] == ["send_mail"]
    (comp,) = [s for s in h.store.record.steps(sid) if s.name == "compensation"]
    assert (
        comp.status is StepStatus.COMPLETED and f"deleted s3://{BUCKET}/{key}" in comp.output_data
    )


# --- an MCP server's tools, compensation and settle check configured -------------------------

LEDGER_SERVER = ROOT / "tests" / "tools" / "mcp_servers" / "ledger_server.py"
POLICY = {
    "compensate": {"tool": "delete_payment", "args": {"id": "{output.id}"}},
    "settle": {"tool": "find_payment", "args": {"ref": "{input.ref}"}, "done_field": "found"},
}


def ledger_rows(db: Path) -> list[str]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return [r[0] for r in conn.execute("SELECT ref FROM payments ORDER BY id")]
    except sqlite3.OperationalError:  # the server has not created its table yet
        return []
    finally:
        conn.close()


async def test_an_mcp_tools_effect_is_undone_by_the_configured_tool_of_its_server(
    make: Any, tmp_path: Path
) -> None:
    db = tmp_path / "mcp-ledger.db"
    servers = parse_servers(
        {
            "ledger": {
                "command": sys.executable,
                "args": [str(LEDGER_SERVER)],
                "env": {"LEDGER_DB": str(db)},
            }
        },
        dict(os.environ),
    )
    name = "mcp__ledger__record_payment"
    h = make(
        [
            {"tool_calls": [{"name": name, "input": {"ref": "M-1", "amount": 3}}]},
            {"tool_calls": [{"name": name, "input": {"ref": "M-2", "amount": 4}}]},
            {"text": "recorded"},
        ],
        mcp_servers=servers,
        tool_policies={name: ToolPolicy.model_validate(POLICY)},
    )
    sid = await h.ask("record both")
    assert ledger_rows(db) == ["M-1", "M-2"]
    marks = [s.input_data for s in h.store.record.steps(sid) if s.name == "outside_effects"]
    assert [m["effect"] for m in marks] == ["compensable", "compensable"]
    outcome = await h.runtime.rollback(sid, first_user(h, sid))
    assert ledger_rows(db) == []
    assert [c.input_data["action"] for c in outcome.compensated] == ["delete_payment"] * 2
    assert all("deleted 1 payment(s)" in c.output_data for c in outcome.compensated)


def test_an_mcp_call_killed_mid_run_is_settled_by_the_servers_lookup(tmp_path: Path) -> None:
    """A real `xclaw run` SIGKILLed while the MCP call is running, after the server recorded
    the payment: the next start asks find_payment, settles the call, asks nobody."""
    db = tmp_path / "mcp-ledger.db"
    pause = tmp_path / "pause"
    pause.touch()
    script = tmp_path / "script.json"
    name = "mcp__ledger__record_payment"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": name, "input": {"ref": "K-1", "amount": 1}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    (tmp_path / "xclaw.yaml").write_text(
        "mcp_servers:\n"
        f"  ledger: {{command: {sys.executable}, args: [{LEDGER_SERVER}, --pause-file, {pause}], "
        f"env: {{LEDGER_DB: {db}}}}}\n"
        f"tool_policies:\n  {name}: {json.dumps(POLICY)}\n"
    )
    env = {
        **os.environ,
        "XCLAW_HOME": str(tmp_path / "home"),
        "XCLAW_MODEL": f"script:{script}",
        "XCLAW_DB": str(tmp_path / "xclaw.db"),
    }
    env.pop("XCLAW_CONFIG", None)

    def start(*args: str, **extra: str) -> Any:
        import subprocess

        return subprocess.Popen(
            [sys.executable, "-m", "xclaw", "run", *args],
            cwd=tmp_path,
            env={**env, **extra},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    proc = start("--approval", "yolo", "record it")
    wait_until(lambda: db.exists() and ledger_rows(db) == ["K-1"], "the server recorded it", 90)
    kill(proc)
    pause.unlink()
    conn = sqlite3.connect(tmp_path / "xclaw.db")
    sid = conn.execute("SELECT session_id FROM sessions").fetchone()[0]
    conn.close()
    resumed = start("--approval", "yolo", "--session", sid)
    out, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, out
    assert "its settle check shows it ran" in out and "may or may not have run" not in out
    assert ledger_rows(db) == ["K-1"]  # once
    conn = sqlite3.connect(tmp_path / "xclaw.db")
    try:
        checks = conn.execute("SELECT input_data FROM traces WHERE name='settle_check'").fetchall()
    finally:
        conn.close()
    assert [json.loads(c[0])["outcome"] for c in checks] == ["done"]
