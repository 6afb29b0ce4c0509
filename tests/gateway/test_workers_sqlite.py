"""Two `xclaw serve` processes on one SQLite file: the same one-driver guarantee as on
PostgreSQL (one driver), through the lease columns of the session row."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.harness import Client, write_script
from tests.gateway.test_workers import TOKEN, PgServer, health, sh

pytestmark = pytest.mark.slow


async def test_two_servers_on_one_file_never_both_drive_a_session(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [{"text": "", "tool_calls": [sh("sleep 1.5")]}, {"text": "slept"}, {"text": "again"}],
    )
    servers = []
    try:
        for name in ("a", "b"):
            root = tmp_path / name
            root.mkdir()
            s = PgServer(
                root=root,
                script=script,
                approval="yolo",
                db=str(tmp_path / "shared.db"),
                shared_workspace=tmp_path / "workspaces",
            )
            servers.append(s)
            s.start()
        a, b = servers
        assert health(a)["backend"] == "sqlite"
        ca = await Client.open(a, token=TOKEN)
        await ca.attach(None)
        sid = ca.session_id
        await ca.send({"type": "message", "sessionId": sid, "content": "sleep"})
        await ca.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        cb = await Client.open(b, token=TOKEN)
        status = await cb.attach(sid)
        assert status["busy"] is True  # b knows a drives it: a refresh there just observes
        await cb.send({"type": "message", "sessionId": sid, "content": "me too"})
        err = await cb.until_type("error")
        assert err["code"] == "busy" and health(a)["worker"] in err["content"]
        assert (await ca.until_type("reply"))["content"] == "slept"
        assert health(a)["sessionsDriven"] == [] and health(b)["sessionsDriven"] == []
        # The lease went with the reply: b may drive the session now.
        await cb.send({"type": "message", "sessionId": sid, "content": "your turn"})
        assert (await cb.until_type("reply"))["content"] == "again"
        await ca.close()
        await cb.close()
    finally:
        for s in servers:
            s.kill()
