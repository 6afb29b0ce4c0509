"""Rollback past outside effects through a real `xclaw serve`, as every client meets it: the
WebSocket `/rollback` (a preview first, then `--confirm` / `--accept-irreversible`), the
Python API through the gateway (`xclaw.connect`: `rollback_preview`, `IrreversibleEffects`
with the preview, `accept_irreversible=True`), `xclaw chat` (it shows the preview and asks),
and a gateway SIGKILLed in the middle of a compensation, the rollback finished when the
client reconnects to the restarted server. The outside system: a payments table (SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import xclaw
from tests.cli.test_chat import spawn_chat
from tests.gateway.harness import Client, Server, write_script
from tests.gateway.mcp_http import call, mcp_host
from tests.ledger import Ledger, pay
from tests.waiting import wait_until
from xclaw.errors import IrreversibleEffects

pytestmark = pytest.mark.slow

TURNS = [
    {"text": "Paying.", "tool_calls": [pay("A")]},
    {"text": "Mailing.", "tool_calls": [pay("M", tool="record_payment_unchecked")]},
    {"text": "Paid and noted."},
]


class LedgerServer(Server):
    """`xclaw serve` with the ledger's Python tools in its xclaw.yaml and environment."""

    ledger: Ledger

    def env(self) -> dict[str, str]:
        env = super().env()
        self.ledger.install(self.root / "tools")
        config = self.root / "xclaw.yaml"
        config.write_text(config.read_text() + (self.root / "tools" / "xclaw.yaml").read_text())
        return {
            **env,
            **self.ledger.env(),
            **self.extra_env,
            "PYTHONPATH": str(self.root / "tools"),
        }


def serve(tmp_path: Path, turns: list[dict[str, Any]], **extra_env: str) -> LedgerServer:
    root = tmp_path / "srv"
    (root / "tools").mkdir(parents=True)
    server = LedgerServer(
        root=root, script=write_script(root / "script.json", turns), approval="yolo"
    )
    server.ledger = Ledger(tmp_path)
    server.extra_env = extra_env  # type: ignore[attr-defined]
    return server


@pytest.fixture
def server(tmp_path: Path) -> Any:
    made: list[Server] = []

    def start(turns: list[dict[str, Any]] = TURNS, **extra_env: str) -> LedgerServer:
        s = serve(tmp_path, turns, **extra_env)
        made.append(s)
        s.start()
        return s

    yield start
    for s in made:
        s.kill()


async def test_the_websocket_rollback_previews_then_undoes_on_confirmation(server: Any) -> None:
    srv = server()
    c = await Client.open(srv)
    await c.attach(None)
    await c.turn("pay and mail")
    sid = c.session_id
    assert srv.ledger.refs() == ["A", "M"]

    await c.send({"type": "message", "sessionId": sid, "content": "/rollback s0001"})
    preview = await c.until_type("rollback_preview")
    assert [e["tool"] for e in preview["compensable"]] == ["record_payment"]
    assert [e["tool"] for e in preview["irreversible"]] == ["record_payment_unchecked"]
    notice = c.of_type("notice")[-1]["content"]
    assert "/rollback s0001 --accept-irreversible" in notice
    assert srv.ledger.refs() == ["A", "M"]  # nothing done

    await c.send({"type": "message", "sessionId": sid, "content": "/rollback s0001 --confirm"})
    error = await c.until_type("error")
    assert (
        error["code"] == "irreversible_effects" and "record_payment_unchecked" in error["content"]
    )

    await c.send(
        {"type": "message", "sessionId": sid, "content": "/rollback s0001 --accept-irreversible"}
    )
    rolled = await c.until_type("rolledback")
    assert [x["tool"] for x in rolled["compensated"]] == ["record_payment"]
    assert [x["tool"] for x in rolled["notUndone"]] == ["record_payment_unchecked"]
    await c.until_type("history")
    assert srv.ledger.refs() == ["M"]
    # Live views saw the compensation step as it ran.
    steps = [f["step"] for f in c.of_type("step")]
    assert any(s["name"] == "compensation" and s["status"] == "completed" for s in steps)
    await c.close()


async def test_the_python_api_through_the_gateway(server: Any) -> None:
    srv = server()
    async with xclaw.connect(srv.http, token=srv.token) as agent:
        session = await agent.new_session(title="payments")
        await session.send("pay and mail")
        preview = await session.rollback_preview("s0001")
        assert [e.tool for e in preview.compensable] == ["record_payment"]
        assert [e.why for e in preview.irreversible] == ["irreversible"]
        with pytest.raises(IrreversibleEffects) as refused:
            await session.rollback("s0001")
        assert refused.value.effects["irreversible"][0]["tool"] == "record_payment_unchecked"
        rolled = await session.rollback("s0001", accept_irreversible=True)
        assert [c.tool for c in rolled.compensated] == ["record_payment"]
        assert [e.tool for e in rolled.not_undone] == ["record_payment_unchecked"]
        steps = await session.steps()
        assert [s.name for s in steps if s.type == "system_alert"] == ["rollback", "compensation"]
    assert srv.ledger.refs() == ["M"]


def test_xclaw_chat_shows_what_it_undoes_and_asks(server: Any, tmp_path: Path) -> None:
    srv = server([{"text": "Paying.", "tool_calls": [pay("A")]}, {"text": "Paid."}])
    t = spawn_chat(srv, tmp_path, "--new")
    t.prompt()
    t.line("pay A")
    t.expect(r"xclaw: Paid\.")
    t.prompt()
    t.line("/rollback s0001")
    t.expect(r"\[rollback\] to before s0001: outside effects after it")
    t.expect(r"s\d{4} record_payment: undone by \S+undo_payment\(input=")
    t.expect(r"Undo 1 outside effect\(s\) and roll back\? \[y/N\]")
    t.line("y")
    t.expect(r"\[rollback\] session reset to before step s0001")
    t.expect(r"\[rollback\] 1 outside effect\(s\) undone: s\d{4} by s\d{4}")
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0
    assert srv.ledger.refs() == []


async def test_a_gateway_killed_mid_compensation_finishes_the_rollback_on_reconnect(
    server: Any,
) -> None:
    srv = server(UNDO_PAUSE="60")
    c = await Client.open(srv)
    await c.attach(None)
    await c.turn("pay and mail")
    sid = c.session_id
    await c.send(
        {"type": "message", "sessionId": sid, "content": "/rollback s0001 --accept-irreversible"}
    )
    # Its log line is written after the delete's commit and before the pause: waiting for the
    # row alone once killed it in between (the line never written, "undo A" counted 0 times).
    wait_until(
        lambda: srv.ledger.refs() == ["M"] and "undo A" in srv.ledger.calls(),
        "the compensation deleted A's row and is pausing",
        60,
    )
    await c.close()
    srv.kill()  # SIGKILL, in the middle of the compensation (it pauses after its delete)
    srv.extra_env = {}  # type: ignore[attr-defined]
    srv.start()
    c = await Client.open(srv)
    await c.attach(sid)  # the next start of the session: the rollback is carried on
    await c.until(
        lambda f: (
            f["type"] == "notice" and "a rollback cut short by a crash is finished" in f["content"]
        )
    )
    await c.until_type("history")
    assert srv.ledger.refs() == ["M"]
    assert srv.ledger.undone() == ["A"]  # removed once (noted in the delete's transaction)
    assert srv.ledger.calls().count("undo A") == 1
    await c.close()


async def test_the_mcp_rollback_tool_on_the_gateway_previews_then_needs_acceptance(
    server: Any,
) -> None:
    """`/mcp` on the gateway: the rollback tool shows what it would undo and what would stay
    done; confirm alone is refused past an irreversible effect; accept_irreversible undoes
    the payment and names what stays done."""
    s = server()
    async with mcp_host(s) as host:
        sid = (await call(host, "send_message", text="pay and mail", wait_s=60))["session_id"]
        assert s.ledger.refs() == ["A", "M"]
        preview = await call(host, "rollback", session_id=sid, step_id="s0001")
        assert preview["rolled_back"] is False
        assert [e["tool"] for e in preview["preview"]["compensable"]] == ["record_payment"]
        assert [e["tool"] for e in preview["preview"]["irreversible"]] == [
            "record_payment_unchecked"
        ]
        assert "accept_irreversible=true" in preview["text"]
        refused = await host.call_tool(
            "rollback", {"session_id": sid, "step_id": "s0001", "confirm": True}
        )
        assert refused.is_error and "irreversible" in refused.content[0].text
        assert s.ledger.refs() == ["A", "M"]  # nothing done
        done = await call(
            host, "rollback", session_id=sid, step_id="s0001", accept_irreversible=True
        )
        assert done["rolled_back"] is True
        assert [c["tool"] for c in done["compensated"]] == ["record_payment"]
        assert [e["tool"] for e in done["not_undone"]] == ["record_payment_unchecked"]
        assert s.ledger.refs() == ["M"]
