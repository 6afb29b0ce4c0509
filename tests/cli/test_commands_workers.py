"""`xclaw workers`: the registered workers and the leases of unfinished sessions."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from xclaw.cli.main import _register, cli
from xclaw.store import open_store
from xclaw.store.leases import new_worker_id
from xclaw.store.model import Status


def test_workers_lists_workers_and_leases(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = open_store(db)
    other = open_store(db)  # a second process's view: its worker dies below
    try:
        alive, dead = new_worker_id(), new_worker_id()
        store.register_worker(alive, {"port": 3001})
        other.register_worker(dead)
        a = store.create_session(title="driven").session_id
        store.transition(a, Status.RUNNING)
        b = store.create_session(title="orphaned").session_id
        store.transition(b, Status.RUNNING)
        finished = store.create_session().session_id
        store.transition(finished, Status.RUNNING)
        store.transition(finished, Status.SUCCESS)
        assert store.acquire_lease(a, alive, 60) and other.acquire_lease(b, dead, 60)
        assert store.acquire_lease(finished, alive, 60)
        other.close()
        _register()
        runner = CliRunner()
        out = runner.invoke(cli, ["workers", "--db", str(db)])
        assert out.exit_code == 0, out.output
        lines = out.output.splitlines()
        assert any(alive in line and "alive" in line and a in line for line in lines)
        assert any(dead in line and "dead" in line for line in lines)
        assert any(b in line and "owner dead: free to take over" in line for line in lines)
        assert finished not in out.output  # finished sessions only with --all
        data = json.loads(
            runner.invoke(cli, ["workers", "--json", "--all", "--db", str(db)]).output
        )
        assert {w["workerId"]: w["alive"] for w in data["workers"]} == {alive: True, dead: False}
        driving = {w["workerId"]: set(w["sessions"]) for w in data["workers"]}
        assert driving == {alive: {a, finished}, dead: set()}
        leases = {x["sessionId"]: x for x in data["leases"]}
        assert leases[a]["live"] and not leases[b]["live"] and leases[b]["ownerAlive"] is False
        assert finished in leases
    finally:
        store.close()
        other.close()
