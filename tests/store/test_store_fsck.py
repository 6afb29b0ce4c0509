"""`xclaw fsck`'s checks and repairs on both backends (a real SQLite file, real PostgreSQL):
a healthy record passes; each broken invariant, written with raw SQL as a bug or a
hand edit would, is found; --repair fixes what is safe, in one transaction, after a backup."""

from __future__ import annotations

from typing import Any

from tests.writes import finish
from xclaw.ops import fsck
from xclaw.store.base import Store
from xclaw.store.snapshots.model import content_hash
from xclaw.store.steps.model import NewStep, Status, StepType
from xclaw.store.steps.writes import AddStep, BeginStep

from .conftest import Backend


def _turn(store: Store, sid: str, calls: list[tuple[str, str]], *, final: bool = True) -> None:
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "do it"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "script:x", {}, user.step_id))
    )
    tool_calls = [{"id": cid, "name": name, "input": {}} for cid, name in calls]
    store.record.write(finish(sid, llm.seq, output_data={"text": "", "tool_calls": tool_calls}))
    for cid, name in calls:
        t = store.record.write(
            BeginStep(
                session_id=sid, step=NewStep(StepType.TOOL_CALL, name, {}, llm.step_id, call_id=cid)
            )
        )
        store.record.write(finish(sid, t.seq, output_data="ok"))
    if final:
        last = store.record.write(
            BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "script:x", {}, user.step_id))
        )
        store.record.write(
            finish(
                sid,
                last.seq,
                output_data={"text": "done", "tool_calls": []},
                session_status=Status.SUCCESS,
            )
        )


def _healthy(store: Store) -> str:
    sid = store.record.create_session(title="t").session_id
    _turn(store, sid, [("c1", "write_file"), ("c2", "shell")])
    data = b"hello"
    store.snapshots.put_blobs({content_hash(data): data})
    store.snapshots.save_snapshot(
        sid, 4, {"a.txt": {"hash": content_hash(data), "size": 5, "mode": 0o644}}
    )
    return sid


def _codes(report: fsck.Report) -> set[str]:
    return {f.code for f in report.findings}


def test_a_healthy_record_passes(store: Store) -> None:
    _healthy(store)
    report = fsck.check(store)
    assert report.ok and report.findings == [], [f.to_json() for f in report.findings]
    assert (report.sessions, report.steps, report.snapshots, report.blobs) == (1, 5, 1, 1)


def test_a_run_that_stopped_after_the_model_call_is_not_a_finding(store: Store) -> None:
    """Cancel/crash between the answer and the tool: no later model call, nothing missing."""
    sid = store.record.create_session().session_id
    _turn(store, sid, [("c1", "shell")], final=False)
    store.record.write(AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "again")))
    sid2 = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid2, step=NewStep(StepType.USER_INPUT, "user", "x"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid2, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(
        finish(sid2, llm.seq, output_data={"tool_calls": [{"id": "k", "name": "shell"}]})
    )
    assert fsck.check(store).ok


def test_a_requested_tool_call_without_its_tool_step_fails(store: Store, backend: Backend) -> None:
    sid = _healthy(store)
    backend.query("DELETE FROM traces WHERE session_id=? AND seq=4", (sid,))
    report = fsck.check(store)
    assert not report.ok
    [f] = report.findings
    assert (f.code, f.session_id, f.step, f.repair) == ("tool_step_missing", sid, "s0002", None)
    assert "shell" in f.message and "c2" in f.message


def test_a_duplicated_and_an_unrequested_tool_step_fail(store: Store, backend: Backend) -> None:
    sid = _healthy(store)
    t = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "shell", {}, f"{sid}:s0002", call_id="c2"),
        )
    )
    store.record.write(finish(sid, t.seq, output_data="again"))
    store.record.write(
        AddStep(
            session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {}, None, call_id="nobody")
        )
    )
    assert {"tool_step_duplicate", "tool_step_unrequested"} <= _codes(fsck.check(store))


def test_an_interrupted_attempt_then_a_retry_is_one_tool_step(
    store: Store, backend: Backend
) -> None:
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "x"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(
        finish(sid, llm.seq, output_data={"tool_calls": [{"id": "r", "name": "read_file"}]})
    )
    store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "read_file", {}, llm.step_id, call_id="r"),
        )
    )
    store.record.mark_interrupted(sid)
    again = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "read_file", {}, llm.step_id, call_id="r"),
        )
    )
    store.record.write(finish(sid, again.seq, output_data="text"))
    last = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(
        finish(sid, last.seq, output_data={"text": "ok"}, session_status=Status.SUCCESS)
    )
    assert fsck.check(store).findings == []


def test_broken_invariants_are_found_and_safe_ones_repaired(store: Store, backend: Backend) -> None:
    sid = _healthy(store)
    other = store.record.create_session().session_id
    store.record.write(AddStep(session_id=other, step=NewStep(StepType.USER_INPUT, "user", "x")))
    paused = store.record.create_session().session_id
    store.record.write(AddStep(session_id=paused, step=NewStep(StepType.USER_INPUT, "user", "x")))
    q = backend.query
    # A running step in a finished session, next_seq below a step, a parent in another
    # session, a Paused session with no approval pending, a lease expiry with no owner,
    # a blob no snapshot names, a snapshot naming a blob that is gone.
    q("UPDATE traces SET status='running', end_time=NULL WHERE session_id=? AND seq=3", (sid,))
    q("UPDATE sessions SET next_seq=2 WHERE session_id=?", (sid,))
    q("UPDATE traces SET parent_step_id=? WHERE session_id=? AND seq=1", (f"{sid}:s0001", other))
    q("UPDATE sessions SET current_status='Paused' WHERE session_id=?", (paused,))
    q("UPDATE sessions SET lease_expires_at=1 WHERE session_id=?", (paused,))
    stray = b"nobody's"
    store.snapshots.put_blobs({content_hash(stray): stray})
    report = fsck.check(store)
    found = _codes(report)
    assert {
        "running_step_in_finished_session",
        "seq_reused",
        "parent_outside_session",
        "paused_without_approval",
        "lease_expiry_without_owner",
        "blob_unreferenced",
        "snapshot_beyond_next_seq",
    } <= found, found
    assert not report.ok

    fsck.repair(store, report, stamp="t1")
    assert report.backup is not None
    after = fsck.check(store)
    assert after.ok and after.findings == [], [f.to_json() for f in after.findings]
    step = store.record.get_step(sid, 3)
    assert step.interrupted  # kept, marked interrupted: never deleted
    assert store.record.get_session(paused).status is Status.RUNNING
    assert store.record.get_step(other, 1).parent_step_id is None
    assert q("SELECT next_seq FROM sessions WHERE session_id=?", (sid,)) == [(6,)]
    # The backup holds the database as it was before the repair.
    if backend.name == "sqlite":
        import sqlite3

        conn = sqlite3.connect(report.backup)
        try:
            assert conn.execute(
                "SELECT status FROM traces WHERE session_id=? AND seq=3", (sid,)
            ).fetchone() == ("running",)
        finally:
            conn.close()
    else:
        schema = report.backup.split()[1]
        rows: list[Any] = q(
            f'SELECT status FROM "{schema}".traces WHERE session_id=? AND seq=3', (sid,)
        )
        assert rows == [("running",)]
        q(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_parent_link_to_no_step_is_found_and_detached(store: Store, backend: Backend) -> None:
    """A parent naming a step that does not exist (the database's own foreign key off, as a
    hand edit or another tool may leave it) is found on both backends, named as such."""
    sid = _healthy(store)
    edit = (
        f"UPDATE traces SET parent_step_id = '{sid}:s0042' WHERE session_id = '{sid}' AND seq = 3"
    )
    if backend.name == "postgres":  # foreign keys are triggers there: off for this session
        edit = f"SET session_replication_role = replica; {edit}"
    backend.query(edit)
    report = fsck.check(store)
    (found,) = report.errors
    assert (found.code, found.session_id, found.step) == ("parent_missing", sid, "s0003")
    assert "s0042 names no step of the session" in found.message and found.repair is not None
    fsck.repair(store, report, stamp="t2")
    assert fsck.check(store).ok and store.record.get_step(sid, 3).parent_step_id is None
    if backend.name == "postgres":
        schema = str(report.backup).split()[1]
        backend.query(f'DROP SCHEMA "{schema}" CASCADE')


def test_corrupt_or_missing_blobs_are_found_not_repaired(store: Store, backend: Backend) -> None:
    sid = _healthy(store)
    h = content_hash(b"hello")
    q = backend.query
    if backend.name == "sqlite":
        q("UPDATE blobs SET data=X'6a656c6c6f' WHERE hash=?", (h,))
    else:
        q("UPDATE blobs SET data='\\x6a656c6c6f'::bytea WHERE hash=?", (h,))
    report = fsck.check(store)
    assert [f.code for f in report.findings] == ["blob_corrupt"]
    q("DELETE FROM blobs WHERE hash=?", (h,))
    report = fsck.check(store)
    assert [(f.code, f.session_id, f.repair) for f in report.findings] == [
        ("blob_missing", sid, None)
    ]


def test_a_session_a_live_worker_drives_is_not_repaired(store: Store, backend: Backend) -> None:
    sid = _healthy(store)
    lease = store.leases.acquire_lease(sid, "w1", 60)
    assert lease is not None
    backend.query(
        "UPDATE traces SET status='running', end_time=NULL WHERE session_id=? AND seq=3", (sid,)
    )
    report = fsck.check(store)
    fsck.repair(store, report, stamp="t2")
    assert report.skipped_live == [sid] and report.repaired == [] and report.backup is None
    assert not fsck.check(store).ok
    if backend.name == "postgres":
        pass  # no backup schema was made: nothing to drop


def test_a_sub_agents_task_does_not_hide_a_missing_main_tool_step(
    store: Store, backend: Backend
) -> None:
    """A sub-agent's task is recorded as its own user message inside the turn: the main
    agent's turn goes on past it, so its missing tool step is still found."""
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "go"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(
        finish(
            sid,
            llm.seq,
            output_data={
                "tool_calls": [
                    {"id": "w", "name": "write_file"},
                    {"id": "s", "name": "spawn_agent"},
                ]
            },
        )
    )
    w = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "write_file", {}, llm.step_id, call_id="w"),
        )
    )
    store.record.write(finish(sid, w.seq, output_data="ok"))
    spawn = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "spawn_agent", {}, llm.step_id, call_id="s"),
        )
    )
    agent = spawn.display_id
    store.record.write(
        AddStep(
            session_id=sid,
            step=NewStep(StepType.USER_INPUT, "user", "task", spawn.step_id, agent=agent),
        )
    )
    sub = store.record.write(
        BeginStep(
            session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, spawn.step_id, agent=agent)
        )
    )
    store.record.write(finish(sid, sub.seq, output_data={"text": "sub done"}))
    store.record.write(finish(sid, spawn.seq, output_data="sub done"))
    last = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(
        finish(sid, last.seq, output_data={"text": "ok"}, session_status=Status.SUCCESS)
    )
    assert fsck.check(store).findings == []
    backend.query("DELETE FROM traces WHERE session_id=? AND seq=?", (sid, w.seq))
    assert [f.code for f in fsck.check(store).findings] == ["tool_step_missing"]


def test_a_database_being_written_is_never_reported_broken(store_factory: Any) -> None:
    """fsck reads one consistent view: a writer adding turns meanwhile (new steps, next_seq
    moving, snapshots and blobs coming) never makes the healthy record look broken."""
    import threading

    writer_store = store_factory()
    checker = store_factory()
    done = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(25):
                sid = writer_store.record.create_session().session_id
                _turn(writer_store, sid, [(f"a{i}", "write_file"), (f"b{i}", "shell")])
                data = f"content {i}".encode()
                writer_store.snapshots.put_blobs({content_hash(data): data})
                writer_store.snapshots.save_snapshot(
                    sid, 4, {"f": {"hash": content_hash(data), "size": len(data), "mode": 0o644}}
                )
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=write)
    t.start()
    checks = 0
    while not done.is_set() or checks == 0:
        report = fsck.check(checker)
        assert report.errors == [], [f.to_json() for f in report.errors]
        checks += 1
    t.join()
    assert not errors, errors
    final = fsck.check(checker)
    assert final.ok and final.sessions == 25


def test_an_image_a_tool_step_returned_is_a_referenced_blob(store: Store) -> None:
    """view_file keeps its images as blobs named by the tool step: no unreferenced finding."""
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "look"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "script:x", {}, user.step_id))
    )
    calls = [{"id": "c1", "name": "view_file", "input": {"path": "p.png"}}]
    store.record.write(finish(sid, llm.seq, output_data={"text": "", "tool_calls": calls}))
    image = b"\x89PNG image bytes"
    store.snapshots.put_blobs({content_hash(image): image})
    t = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "view_file", {}, llm.step_id, call_id="c1"),
        )
    )
    refs = [{"hash": content_hash(image), "media_type": "image/png", "size": len(image)}]
    store.record.write(finish(sid, t.seq, output_data={"content": "[image p.png]", "images": refs}))
    last = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "script:x", {}, user.step_id))
    )
    store.record.write(
        finish(
            sid,
            last.seq,
            output_data={"text": "red", "tool_calls": []},
            session_status=Status.SUCCESS,
        )
    )
    report = fsck.check(store)
    assert "blob_unreferenced" not in _codes(report), [f.to_json() for f in report.findings]


def test_an_image_that_is_gone_is_found(store: Store, backend: Backend) -> None:
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "look"))
    )
    image = b"\x89PNG other bytes"
    store.snapshots.put_blobs({content_hash(image): image})
    t = store.record.write(
        AddStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "view_file", {}, user.step_id),
            output_data={"content": "[image]", "images": [{"hash": content_hash(image)}]},
        )
    )
    assert t.seq == 2
    assert "image_blob_missing" not in _codes(fsck.check(store))
    backend.query("DELETE FROM blobs WHERE hash=?", (content_hash(image),))
    assert "image_blob_missing" in _codes(fsck.check(store))
    # The operator is told where: the step whose image is gone.
    [gone] = [f for f in fsck.check(store).findings if f.code == "image_blob_missing"]
    assert gone.step == "s0002"
