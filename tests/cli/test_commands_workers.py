"""`xclaw workers`: the registered workers and the leases of unfinished sessions."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from xclaw.cli.main import _register, cli
from xclaw.store import open_store
from xclaw.store.leases import new_worker_id
from xclaw.store.steps.model import Status


def test_workers_lists_workers_and_leases(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = open_store(db)
    other = open_store(db)  # a second process's view: its worker dies below
    try:
        alive, dead = new_worker_id(), new_worker_id()
        store.leases.register_worker(alive, {"port": 3001})
        other.leases.register_worker(dead)
        a = store.record.create_session(title="driven").session_id
        store.record.transition(a, Status.RUNNING)
        b = store.record.create_session(title="orphaned").session_id
        store.record.transition(b, Status.RUNNING)
        # Stopped for its next instruction (a cancel), its worker's lease run out.
        waiting = store.record.create_session(title="waiting").session_id
        store.record.transition(waiting, Status.RUNNING)
        store.record.transition(waiting, Status.RUNNING, awaiting_input=True)
        finished = store.record.create_session().session_id
        store.record.transition(finished, Status.RUNNING)
        store.record.transition(finished, Status.SUCCESS)
        assert store.leases.acquire_lease(a, alive, 60) and other.leases.acquire_lease(b, dead, 60)
        assert store.leases.acquire_lease(finished, alive, 60)
        waiting_lease = store.leases.acquire_lease(waiting, alive, 60)
        assert waiting_lease is not None and store.leases.release_lease(waiting_lease)
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
        # Sessions in the words of `xclaw sessions` (session_state), not the stored status:
        # Running only while a run is in flight.
        row = {sid: next(line for line in lines if line.startswith(sid)) for sid in (a, b, waiting)}
        assert "Running" in row[a]
        assert "Interrupted" in row[b] and "Running" not in row[b]
        assert "Waiting for your instruction" in row[waiting] and "Running" not in row[waiting]
        data = json.loads(
            runner.invoke(cli, ["workers", "--json", "--all", "--db", str(db)]).output
        )
        assert {w["workerId"]: w["alive"] for w in data["workers"]} == {alive: True, dead: False}
        driving = {w["workerId"]: set(w["sessions"]) for w in data["workers"]}
        assert driving == {alive: {a, finished}, dead: set()}
        leases = {x["sessionId"]: x for x in data["leases"]}
        assert leases[a]["live"] and not leases[b]["live"] and leases[b]["ownerAlive"] is False
        assert finished in leases
        assert leases[waiting]["status"] == "Running"  # the stored word stays, for scripts
        assert (leases[waiting]["state"], leases[waiting]["stateText"]) == (
            "waiting",
            "Waiting for your instruction",
        )
        assert leases[a]["state"] == "running" and leases[b]["state"] == "interrupted"
        assert leases[finished]["stateText"] == "Success"
    finally:
        store.close()
        other.close()
