"""Workspace snapshots in the store (contract): blobs, whole/delta snapshots, the restore
journal written by rollback and fork, and the sweep of unreferenced blobs."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.store.builders import llm, tool, user
from tests.writes import finish
from xclaw.errors import MissingBlobs, SessionNotFound, StoreError
from xclaw.store.base import Store
from xclaw.store.snapshots.model import WorkspaceRestore, content_hash
from xclaw.store.steps.writes import AddStep, BeginStep


@pytest.fixture
def snap_store(store: Store) -> Store:
    return store  # both backends keep workspace snapshots (store.snapshots)


def blob(text: str | bytes) -> tuple[str, bytes]:
    data = text.encode() if isinstance(text, str) else text
    return content_hash(data), data


def put(store: Store, *contents: str | bytes) -> dict[str, dict[str, Any]]:
    """Store contents; returns a file entry per content, keyed by the content itself."""
    pairs = dict(blob(c) for c in contents)
    store.snapshots.put_blobs(pairs)
    return {
        (c if isinstance(c, str) else c.hex()): {"hash": h, "size": len(d), "mode": 0o644}
        for c, (h, d) in zip(contents, pairs.items(), strict=True)
    }


def steps(store: Store, sid: str, n: int) -> list[int]:
    return [store.record.write(BeginStep(session_id=sid, step=tool())).seq for _ in range(n)]


def test_blobs_are_content_addressed_checked_and_deduplicated(snap_store: Store) -> None:
    h, data = blob("hello")
    assert snap_store.snapshots.missing_blobs([h]) == {h}
    assert snap_store.snapshots.put_blobs({h: data}) == 5
    assert snap_store.snapshots.put_blobs({h: data}) == 0  # already there: nothing added
    assert snap_store.snapshots.missing_blobs([h, h]) == set()
    assert snap_store.snapshots.get_blobs([h]) == {h: b"hello"}
    with pytest.raises(ValueError, match="does not match its content"):
        snap_store.snapshots.put_blobs({h: b"other"})
    other, _ = blob("never stored")
    with pytest.raises(MissingBlobs) as e:
        snap_store.snapshots.get_blobs([h, other])
    assert e.value.hashes == {other}


def test_compressible_contents_take_less_room_and_read_back_exactly(snap_store: Store) -> None:
    text = b"the same line again and again\n" * 10_000
    noise = os.urandom(200_000)
    (ht, _), (hn, _) = blob(text), blob(noise)
    added = snap_store.snapshots.put_blobs({ht: text, hn: noise})
    assert added < len(text) // 10 + len(noise) + 1_000  # text compressed, noise stored raw
    assert snap_store.snapshots.get_blobs([ht, hn]) == {ht: text, hn: noise}
    assert (
        snap_store.snapshots.put_blobs({content_hash(b""): b""}) == 0
    )  # empty file: stored, 0 bytes
    assert snap_store.snapshots.get_blobs([content_hash(b"")]) == {content_hash(b""): b""}


def test_snapshots_round_trip_as_whole_and_delta(snap_store: Store) -> None:
    sid = snap_store.record.create_session().session_id
    e = put(snap_store, *(f"file {i}" for i in range(10)), "changed")
    base = {f"f{i}.txt": e[f"file {i}"] for i in range(10)}
    base["src"] = {"dir": True, "mode": 0o755}
    base["link"] = {"link": "f1.txt"}
    base["big.bin"] = {"skipped": "too big", "size": 10**9}
    s1, s2, s3 = steps(snap_store, sid, 3)
    first = snap_store.snapshots.save_snapshot(sid, s1, base, new_bytes=60)
    assert (first.files, first.bytes, first.skipped, first.full) == (11, 60, 1, True)
    second_state = {**base, "f3.txt": e["changed"]}
    del second_state["f4.txt"]
    second = snap_store.snapshots.save_snapshot(sid, s2, second_state)
    assert second.full is False  # one changed and one removed entry: a delta
    third = snap_store.snapshots.save_snapshot(
        sid, s3, second_state
    )  # nothing changed: still a row
    assert (third.files, third.full) == (10, False)
    assert snap_store.snapshots.get_snapshot(sid, s1) == base
    assert snap_store.snapshots.get_snapshot(sid, s2) == second_state
    assert snap_store.snapshots.get_snapshot(sid, s3) == second_state
    assert [(i.seq, i.files, i.new_bytes) for i in snap_store.snapshots.list_snapshots(sid)] == [
        (s1, 11, 60),
        (s2, 10, 0),
        (s3, 10, 0),
    ]
    assert snap_store.snapshots.get_snapshot(sid, 99) is None


def test_long_delta_chains_are_cut_by_whole_snapshots(snap_store: Store) -> None:
    sid = snap_store.record.create_session().session_id
    e = put(snap_store, *(f"v{i}" for i in range(150)))
    state = {f"f{i}": e[f"v{i}"] for i in range(20)}
    wholes = []
    for i in range(150):
        state = {**state, "moving": e[f"v{i}"]}
        seq = steps(snap_store, sid, 1)[0]
        wholes.append(snap_store.snapshots.save_snapshot(sid, seq, state).full)
        assert snap_store.snapshots.get_snapshot(sid, seq) == state
    assert 2 <= sum(wholes) <= 4  # the first, then one every 64 at the latest


def test_a_snapshot_must_name_stored_contents_only(snap_store: Store) -> None:
    sid = snap_store.record.create_session().session_id
    h, _ = blob("not stored")
    (seq,) = steps(snap_store, sid, 1)
    with pytest.raises(MissingBlobs) as e:
        snap_store.snapshots.save_snapshot(sid, seq, {"a": {"hash": h, "size": 10, "mode": 0o644}})
    assert e.value.hashes == {h}
    assert snap_store.snapshots.list_snapshots(sid) == []
    e2 = put(snap_store, "x")
    snap_store.snapshots.save_snapshot(sid, seq, {"a": e2["x"]})
    with pytest.raises(StoreError, match="already has a snapshot before s0001"):
        snap_store.snapshots.save_snapshot(sid, seq, {"a": e2["x"]})
    with pytest.raises(SessionNotFound):
        snap_store.snapshots.save_snapshot("nope", 1, {})
    for bad in ("../x", "/etc/passwd", "a/../../b", "", "a//b", "./a"):
        with pytest.raises(ValueError, match="bad path"):
            snap_store.snapshots.save_snapshot(sid, seq + 1, {bad: e2["x"]})


def _session_with_history(store: Store) -> tuple[str, list[int], dict[str, Any]]:
    """s1 user, s2 llm, s3 tool (snapshot: a), s4 tool (snapshot: a, b), s5 llm, s6 tool
    (snapshot: a, b, c)."""
    sid = store.record.create_session(title="t").session_id
    e = put(store, "A", "B", "C")
    store.record.write(AddStep(session_id=sid, step=user()))
    store.record.write(BeginStep(session_id=sid, step=llm()))
    seqs = []
    state: dict[str, Any] = {}
    for name in ("a", "b", "c"):
        state = {**state, f"{name}.txt": e[name.upper()]}
        if name == "c":
            store.record.write(BeginStep(session_id=sid, step=llm()))
        seq = store.record.write(BeginStep(session_id=sid, step=tool())).seq
        # the snapshot before this step holds the files of the steps before it
        store.snapshots.save_snapshot(
            sid, seq, {k: v for k, v in state.items() if k != f"{name}.txt"}
        )
        seqs.append(seq)
    return sid, seqs, e


def test_rollback_journals_the_first_snapshot_at_or_after_the_target(snap_store: Store) -> None:
    sid, (s3, s4, s6), e = _session_with_history(snap_store)
    assert (s3, s4, s6) == (3, 4, 6)
    result = snap_store.record.rollback(sid, "s0005", workspace=WorkspaceRestore((".git/",)))
    r = result.restore
    assert r is not None and r.kind == "rollback" and r.snapshot_seq == 6
    assert r.manifest == {"a.txt": e["A"], "b.txt": e["B"]} and r.ignore == (".git/",)
    assert [s.seq for s in snap_store.snapshots.list_snapshots(sid)] == [
        3,
        4,
    ]  # s6 went with its step
    assert snap_store.snapshots.pending_restores(sid) == [r]
    assert snap_store.snapshots.finish_restore(sid, "another restore") is False
    assert snap_store.snapshots.finish_restore(sid, r.restore_id) is True
    assert snap_store.snapshots.pending_restores() == []


def test_rollback_after_the_last_snapshot_needs_no_restore(snap_store: Store) -> None:
    sid, _, _ = _session_with_history(snap_store)
    snap_store.record.write(BeginStep(session_id=sid, step=llm()))  # s7, no snapshot
    result = snap_store.record.rollback(sid, 7, workspace=WorkspaceRestore())
    assert result.restore is None and snap_store.snapshots.pending_restores(sid) == []
    assert len(snap_store.snapshots.list_snapshots(sid)) == 3


def test_rollback_without_workspace_still_drops_the_deleted_steps_snapshots(
    snap_store: Store,
) -> None:
    sid, _, _ = _session_with_history(snap_store)
    assert snap_store.record.rollback(sid, 4).restore is None
    assert [s.seq for s in snap_store.snapshots.list_snapshots(sid)] == [3]
    assert snap_store.snapshots.pending_restores() == []


def test_rollback_sweeps_blobs_but_keeps_those_of_the_journal(snap_store: Store) -> None:
    sid, _, e = _session_with_history(snap_store)
    c = e["C"]["hash"]
    orphan = put(snap_store, "never referenced")["never referenced"]["hash"]
    r = snap_store.record.rollback(sid, 4, workspace=WorkspaceRestore()).restore
    # s4's state {a} is journaled: a, now named by the journal only (s3's state is empty),
    # is kept; b (named by s6 only), c and the orphan are collected.
    assert r is not None and r.manifest == {"a.txt": e["A"]}
    assert snap_store.snapshots.missing_blobs([e["A"]["hash"], e["B"]["hash"], c, orphan]) == {
        e["B"]["hash"],
        c,
        orphan,
    }
    snap_store.snapshots.finish_restore(sid, r.restore_id)
    assert snap_store.snapshots.gc_blobs() == 1  # the journal is gone: a goes at the next sweep
    assert snap_store.snapshots.missing_blobs([e["A"]["hash"]]) == {e["A"]["hash"]}


def test_fork_copies_snapshots_and_journals_the_state_after_the_fork_point(
    snap_store: Store,
) -> None:
    sid, _, e = _session_with_history(snap_store)
    new = snap_store.record.fork(sid, 4, workspace=WorkspaceRestore(("node_modules/",)))
    assert [s.seq for s in snap_store.snapshots.list_snapshots(new.session_id)] == [3, 4]
    assert snap_store.snapshots.get_snapshot(
        new.session_id, 4
    ) == snap_store.snapshots.get_snapshot(sid, 4)
    (r,) = snap_store.snapshots.pending_restores(new.session_id)
    assert (r.kind, r.source_session_id, r.snapshot_seq) == ("fork", sid, 6)
    assert r.manifest == {"a.txt": e["A"], "b.txt": e["B"]}
    assert len(snap_store.snapshots.list_snapshots(sid)) == 3  # the source is untouched
    # After the last snapshot: the source's current files are copied (no manifest).
    late = snap_store.record.fork(sid, 6, workspace=WorkspaceRestore())
    (r2,) = snap_store.snapshots.pending_restores(late.session_id)
    assert (r2.snapshot_seq, r2.manifest) == (None, None)
    assert snap_store.snapshots.pending_restores(sid) == []


def test_fork_without_workspace_journals_nothing(snap_store: Store) -> None:
    sid, _, _ = _session_with_history(snap_store)
    new = snap_store.record.fork(sid, 3)
    assert snap_store.snapshots.pending_restores(new.session_id) == []
    assert [s.seq for s in snap_store.snapshots.list_snapshots(new.session_id)] == [3]


def test_deleting_sessions_collects_only_unshared_blobs(snap_store: Store) -> None:
    sid, _, e = _session_with_history(snap_store)
    other = snap_store.record.create_session().session_id
    (seq,) = steps(snap_store, other, 1)
    shared = put(snap_store, "only here")["only here"]
    snap_store.snapshots.save_snapshot(other, seq, {"a.txt": e["A"], "x": shared})
    snap_store.record.delete_session(sid)
    assert snap_store.snapshots.missing_blobs([e["A"]["hash"], e["B"]["hash"], e["C"]["hash"]]) == {
        e["B"]["hash"],
        e["C"]["hash"],
    }
    snap_store.record.delete_session(other)
    assert snap_store.snapshots.missing_blobs([e["A"]["hash"], shared["hash"]]) == {
        e["A"]["hash"],
        shared["hash"],
    }


def test_gc_keeps_contents_named_by_deltas_only(snap_store: Store) -> None:
    sid = snap_store.record.create_session().session_id
    e = put(snap_store, *(f"v{i}" for i in range(12)), "orphan")
    state = {f"f{i}": e[f"v{i}"] for i in range(10)}
    s1, s2 = steps(snap_store, sid, 2)
    snap_store.snapshots.save_snapshot(sid, s1, state)
    snap_store.snapshots.save_snapshot(sid, s2, {**state, "new": e["v10"]})  # a delta names v10
    assert snap_store.snapshots.gc_blobs() == 2  # v11 and the orphan
    assert snap_store.snapshots.get_snapshot(sid, s2) == {**state, "new": e["v10"]}
    assert snap_store.snapshots.missing_blobs([e["v10"]["hash"]]) == set()


def test_snapshot_from_is_the_state_just_before_a_step(snap_store: Store) -> None:
    sid, _, e = _session_with_history(snap_store)
    assert snap_store.snapshots.snapshot_from(sid, 1) == (3, {})
    assert snap_store.snapshots.snapshot_from(sid, 5) == (6, {"a.txt": e["A"], "b.txt": e["B"]})
    assert snap_store.snapshots.snapshot_from(sid, 7) is None
    with pytest.raises(SessionNotFound):
        snap_store.snapshots.snapshot_from("nope", 1)


def test_sweep_keeps_images_a_tool_step_refers_to_until_the_step_goes(snap_store: Store) -> None:
    """view_file's images live in the blob store; the tool step's output names them by hash."""
    from xclaw.store.steps.model import NewStep, StepType

    sid = snap_store.record.create_session().session_id
    h, data = blob(b"\x89PNG fake image bytes")
    other_h, other = blob(b"an unreferenced blob")
    snap_store.snapshots.put_blobs({h: data, other_h: other})
    step = snap_store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "view_file", {"path": "p.png"}))
    )
    snap_store.record.write(
        finish(
            sid,
            step.seq,
            output_data={
                "content": "[image p.png]",
                "images": [{"hash": h, "media_type": "image/png"}],
            },
        )
    )
    plain = snap_store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "ls"}))
    )
    snap_store.record.write(finish(sid, plain.seq, output_data='{"images": "just text"}'))
    assert snap_store.snapshots.gc_blobs() == 1  # only the unreferenced one
    assert snap_store.snapshots.get_blobs([h]) == {h: data}
    snap_store.record.rollback(sid, step.seq)
    snap_store.snapshots.gc_blobs()
    with pytest.raises(MissingBlobs):
        snap_store.snapshots.get_blobs([h])


def test_the_next_save_starts_from_the_state_this_store_saved(
    snap_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save after a delta this store wrote does not rebuild the previous state from its
    rows (the last whole manifest and every delta: the cost of a snapshot of a big tree)."""
    from xclaw.store.snapshots import sql as snapshots_module

    sid = snap_store.record.create_session().session_id
    e = put(snap_store, *(f"v{i}" for i in range(5)))
    state = {f"f{i}": e["v0"] for i in range(1000)}
    rebuilt: list[int] = []
    real = snapshots_module.state_tx

    def counting(d: Any, conn: Any, session_id: str, seq: int) -> Any:
        rebuilt.append(seq)
        return real(d, conn, session_id, seq)

    monkeypatch.setattr(snapshots_module, "state_tx", counting)
    s1, s2, s3, s4 = steps(snap_store, sid, 4)
    snap_store.snapshots.save_snapshot(sid, s1, state)  # whole
    snap_store.snapshots.save_snapshot(
        sid, s2, {**state, "f1": e["v1"]}
    )  # on the whole one: rebuilt
    snap_store.snapshots.save_snapshot(
        sid, s3, {**state, "f1": e["v2"]}
    )  # on the delta: remembered
    snap_store.snapshots.save_snapshot(sid, s4, {**state, "f1": e["v2"], "new": e["v3"]})
    assert rebuilt == [s1]
    monkeypatch.undo()
    assert snap_store.snapshots.get_snapshot(sid, s3) == {**state, "f1": e["v2"]}
    assert snap_store.snapshots.get_snapshot(sid, s4) == {**state, "f1": e["v2"], "new": e["v3"]}


def test_a_snapshot_replaced_by_another_process_is_never_taken_as_remembered(
    store_factory: Any,
) -> None:
    """Two stores on one database: the second replaces the first's latest snapshot; the
    first's next save is a delta against what the database holds, not what it remembers."""
    mine, theirs = store_factory(), store_factory()
    sid = mine.record.create_session().session_id
    e = put(mine, "a", "b", "c", "d")
    rest = {f"f{i}": e["d"] for i in range(10)}  # so that the saves below are deltas
    s1, s2, s3 = steps(mine, sid, 3)
    mine.snapshots.save_snapshot(sid, s1, {**rest, "x": e["a"], "y": e["a"]})
    mine.snapshots.save_snapshot(
        sid, s2, {**rest, "x": e["b"], "y": e["a"]}
    )  # remembered by `mine`
    theirs.snapshots.save_snapshot(sid, s2, {**rest, "x": e["c"], "y": e["c"]}, replace=True)
    mine.snapshots.save_snapshot(sid, s3, {**rest, "x": e["b"], "y": e["c"]})
    assert mine.snapshots.get_snapshot(sid, s3) == {**rest, "x": e["b"], "y": e["c"]}
    assert theirs.snapshots.get_snapshot(sid, s3) == {**rest, "x": e["b"], "y": e["c"]}
