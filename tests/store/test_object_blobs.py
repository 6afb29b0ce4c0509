"""File contents in a real S3-compatible object store (SeaweedFS), on both backends: the
database keeps marks only, uploads are conditional and incremental, the sweep never races a
snapshot, a fenced-out worker's uploads are never referenced, and a store that is down gives
a clear error and works again once it is back (store/blobs/objects.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.seaweed import BUCKET, Seaweed, aws_env, held, running_seaweed
from tests.store.builders import tool
from tests.store.conftest import Backend
from xclaw.errors import BlobStoreLost, BlobStoreUnavailable, LeaseLost, MissingBlobs
from xclaw.store.base import Store
from xclaw.store.blobs.s3 import Location
from xclaw.store.snapshots.model import content_hash
from xclaw.store.steps.writes import BeginStep, Kind
from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter

pytestmark = pytest.mark.slow

# Short, for the tests of what expires: long enough that a loaded machine's pauses between a
# put and the next call do not outlast it. The other tests keep the default (an hour): under
# load 13 a put and the save after it once took longer than this, and the save then rightly
# found its content's mark expired (MissingBlobs).
GRACE = 1.5


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path_factory.mktemp("s3")) as w, aws_env(w):
        yield w


def open_objects(backend: Backend, weed: Seaweed, url: str, grace_s: float = 3600.0) -> Store:
    store = backend.open()
    store.snapshots.use_blob_store(url, grace_s=grace_s)
    return store


@pytest.fixture
def objects(backend: Backend, weed: Seaweed) -> Iterator[tuple[Store, str]]:
    url = weed.url()
    store = open_objects(backend, weed, url)
    yield store, url
    store.close()


def blob(text: str | bytes) -> tuple[str, bytes]:
    data = text.encode() if isinstance(text, str) else text
    return content_hash(data), data


def entry(h: str, data: bytes) -> dict[str, Any]:
    return {"hash": h, "size": len(data), "mode": 0o644}


def contents(weed: Seaweed, url: str, backend: Backend) -> set[str]:
    """The contents the bucket holds, as object_blobs says where."""
    return held(weed, url, backend.query("SELECT hash, pack FROM object_blobs"))


def no_contents_in_db(backend: Backend) -> None:
    assert backend.query("SELECT count(*) FROM blobs") == [(0,)]


def test_contents_go_to_the_bucket_and_the_database_keeps_marks_only(
    objects: tuple[Store, str], backend: Backend, weed: Seaweed
) -> None:
    store, url = objects
    h, data = blob(b"hello object store")
    assert store.snapshots.missing_blobs([h]) == {h}
    assert store.snapshots.put_blobs({h: data}) == len(data)
    assert store.snapshots.missing_blobs([h]) == set()
    assert store.snapshots.put_blobs({h: data}) == 0  # written once: the conditional PUT says 412
    assert store.snapshots.get_blobs([h]) == {h: data}
    assert contents(weed, url, backend) == {h}
    assert backend.query("SELECT hash, pos, size FROM object_blobs") == [(h, 0, len(data))]
    sid = store.record.create_session().session_id
    seq = store.record.write(BeginStep(session_id=sid, step=tool())).seq
    store.snapshots.save_snapshot(sid, seq, {"a.txt": entry(h, data)})
    assert store.snapshots.get_snapshot(sid, seq) == {"a.txt": entry(h, data)}
    no_contents_in_db(backend)
    with pytest.raises(ValueError, match="does not match"):
        store.snapshots.put_blobs({h: b"other"})
    other, _ = blob("never stored")
    with pytest.raises(MissingBlobs) as e:
        store.snapshots.get_blobs([h, other])
    assert e.value.hashes == {other}


def test_the_workspace_snapshotter_uploads_only_what_changed(
    objects: tuple[Store, str], backend: Backend, tmp_path: Path, weed: Seaweed
) -> None:
    store, url = objects
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(50):
        (ws / f"f{i}.txt").write_bytes(f"file {i} ".encode() * 200)
    snap = Snapshotter(SnapshotConfig(ignore=()))
    sid = store.record.create_session().session_id
    first = snap.snapshot(
        store.snapshots, sid, store.record.write(BeginStep(session_id=sid, step=tool())).seq, ws
    )
    assert first.new_bytes == sum(p.stat().st_size for p in ws.iterdir())
    (ws / "f7.txt").write_bytes(b"x" * 1024)
    time.sleep(0.03)
    second = snap.snapshot(
        store.snapshots, sid, store.record.write(BeginStep(session_id=sid, step=tool())).seq, ws
    )
    assert second.new_bytes == 1024  # one changed file: its bytes, nothing else
    assert len(contents(weed, url, backend)) == 51
    assert len(weed.objects(url)) == 2  # two uploads, one pack each
    no_contents_in_db(backend)


def test_a_sweep_deletes_unreferenced_objects_only_after_the_grace_period(
    backend: Backend, weed: Seaweed
) -> None:
    url = weed.url()
    store = open_objects(backend, weed, url, grace_s=GRACE)
    try:
        sweep_after_the_grace(store, url, backend, weed)
    finally:
        store.close()


def sweep_after_the_grace(store: Store, url: str, backend: Backend, weed: Seaweed) -> None:
    sid = store.record.create_session().session_id
    (hk, dk), (hg, dg), (hs, ds) = blob("kept"), blob("gone after rollback"), blob("shared")
    store.snapshots.put_blobs({hk: dk})
    store.snapshots.put_blobs({hg: dg})  # a pack of its own: deleted whole once unreferenced
    store.snapshots.put_blobs({content_hash(b"x" + ds): b"x" + ds, hs: ds})  # a pack of two
    s1 = store.record.write(BeginStep(session_id=sid, step=tool())).seq
    store.snapshots.save_snapshot(sid, s1, {"a": entry(hk, dk), "s": entry(hs, ds)})
    s2 = store.record.write(BeginStep(session_id=sid, step=tool())).seq
    store.snapshots.save_snapshot(
        sid, s2, {"a": entry(hk, dk), "b": entry(hg, dg), "s": entry(hs, ds)}
    )
    store.record.rollback(sid, s2)
    assert len(weed.objects(url)) == 3
    assert store.snapshots.gc_blobs() == 0  # unreferenced, but marked more recently than the grace
    time.sleep(GRACE + 0.2)
    assert store.snapshots.gc_blobs() == 2  # the rolled-back content, the never-referenced one
    assert contents(weed, url, backend) == {hk, hs}
    assert len(weed.objects(url)) == 2  # the pack of two stays: one content is referenced
    assert sorted(backend.query("SELECT hash FROM object_blobs")) == sorted([(hk,), (hs,)])
    assert store.snapshots.get_blobs([hk, hs]) == {hk: dk, hs: ds}


def test_a_sweep_between_upload_and_snapshot_never_leaves_a_dangling_reference(
    backend: Backend, weed: Seaweed, tmp_path: Path
) -> None:
    """The race: a snapshotter stores its contents, then stalls past the grace period; a
    sweep deletes them (unreferenced, mark expired); the save must notice (MissingBlobs),
    upload again and reference only objects that exist."""
    url = weed.url()
    store = open_objects(backend, weed, url, grace_s=GRACE)
    sweeper = open_objects(backend, weed, url, grace_s=GRACE)
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("the content under race")
        h = content_hash(b"the content under race")
        swept: list[int] = []

        def stall_then_sweep(name: str) -> None:
            if name == "snapshot.stored" and not swept:
                time.sleep(GRACE + 0.2)  # past the grace: the mark has expired
                swept.append(sweeper.snapshots.gc_blobs())

        snap = Snapshotter(SnapshotConfig(ignore=(), crash_point=stall_then_sweep))
        sid = store.record.create_session().session_id
        seq = store.record.write(BeginStep(session_id=sid, step=tool())).seq
        snap.snapshot(store.snapshots, sid, seq, ws)
        assert swept == [1]  # the sweep did delete the object meanwhile
        assert contents(weed, url, backend) == {h}  # ... and the snapshotter uploaded it again
        assert store.snapshots.get_blobs([h]) == {h: b"the content under race"}
        time.sleep(GRACE + 0.2)
        assert sweeper.snapshots.gc_blobs() == 0  # referenced now: kept whatever its mark's age
        assert contents(weed, url, backend) == {h}

        # With a fresh mark the sweep leaves the object alone and the save goes through.
        (hf, df) = blob("fresh")
        store.snapshots.put_blobs({hf: df})
        assert sweeper.snapshots.gc_blobs() == 0
        store.snapshots.save_snapshot(
            sid,
            store.record.write(BeginStep(session_id=sid, step=tool())).seq,
            {"f": entry(hf, df)},
        )
        assert hf in contents(weed, url, backend)
    finally:
        store.close()
        sweeper.close()


def test_a_worker_that_lost_its_lease_uploads_nothing_anyone_references(
    backend: Backend, weed: Seaweed
) -> None:
    url = weed.url()
    zombie = open_objects(backend, weed, url, grace_s=GRACE)
    heir = open_objects(backend, weed, url, grace_s=GRACE)
    try:
        sid = zombie.record.create_session().session_id
        old = zombie.leases.acquire_lease(sid, "zombie", 0.2)
        assert old is not None
        time.sleep(0.3)
        new = heir.leases.acquire_lease(sid, "heir", 30)
        assert new is not None and new.token != old.token
        seq = heir.record.write(BeginStep(session_id=sid, step=tool()), new).seq
        h, data = blob("written by the zombie after it lost its lease")
        zombie.snapshots.put_blobs({h: data})  # the upload itself cannot be stopped...
        with pytest.raises(LeaseLost):
            zombie.snapshots.save_snapshot(sid, seq, {"z.txt": entry(h, data)}, lease=old)
        assert heir.snapshots.list_snapshots(sid) == []  # ... but nothing references it
        (pack,) = backend.query("SELECT pack FROM object_blobs WHERE hash=?", (h,))[0]
        time.sleep(GRACE + 0.2)
        assert heir.snapshots.gc_blobs() == 1
        assert pack not in weed.objects(url)
        hh, dh = blob("the heir's")
        heir.snapshots.put_blobs({hh: dh})
        heir.snapshots.save_snapshot(sid, seq, {"h.txt": entry(hh, dh)}, lease=new)
        assert heir.snapshots.get_snapshot(sid, seq) == {"h.txt": entry(hh, dh)}
    finally:
        zombie.close()
        heir.close()


def test_an_upload_killed_before_its_rows_is_never_trusted_and_swept_later(
    backend: Backend, weed: Seaweed
) -> None:
    """A worker killed between uploading a pack and writing its rows leaves a pack nothing
    names: nobody takes its contents as stored, a snapshot naming them is refused, and the
    sweep deletes the pack once it is older than the grace period (an object's time is the
    store's, in whole seconds: the grace here is longer than that)."""
    from xclaw.store.blobs.objects import ObjectBlobs, make_packs

    url = weed.url()
    store = open_objects(backend, weed, url, grace_s=GRACE)
    try:
        h, data = blob("uploaded, never marked")
        [(name, pack, _)] = make_packs({h: data})
        blobs = store.snapshots.blobs
        assert isinstance(blobs, ObjectBlobs)
        blobs.bucket.put_many({name: pack})  # ... and the worker dies here
        assert store.snapshots.missing_blobs([h]) == {h}
        sid = store.record.create_session().session_id
        seq = store.record.write(BeginStep(session_id=sid, step=tool())).seq
        with pytest.raises(MissingBlobs):
            store.snapshots.save_snapshot(sid, seq, {"a": entry(h, data)})
        assert store.snapshots.gc_blobs() == 0
        assert name in weed.objects(url)  # younger than the grace: maybe an upload in flight
        time.sleep(GRACE + 1.2)  # and the second of the store's clock
        store.snapshots.gc_blobs()
        assert name not in weed.objects(url)
        assert store.snapshots.put_blobs({h: data}) == len(data)  # uploaded again, in full
        store.snapshots.save_snapshot(sid, seq, {"a": entry(h, data)})
        assert store.snapshots.get_blobs([h]) == {h: data}
    finally:
        store.close()


def test_a_store_that_is_down_is_a_clear_error_and_works_once_back(
    backend: Backend, tmp_path: Path
) -> None:
    with running_seaweed(tmp_path) as weed, aws_env(weed):
        url = weed.url()
        store = backend.open()
        try:
            from xclaw.store.blobs.objects import ObjectBlobs
            from xclaw.store.blobs.s3 import Bucket, Location

            # Short timeouts: the test waits seconds, not the production defaults.
            store.snapshots._blob_store = ObjectBlobs(  # type: ignore[attr-defined]
                store.db._dialect,  # type: ignore[attr-defined]
                store.snapshots.blobs._access,  # type: ignore[attr-defined]
                Bucket(Location.parse(url), connect_timeout_s=1, read_timeout_s=1),
            )
            h, data = blob("before the outage")
            store.snapshots.put_blobs({h: data})
            weed.stop()
            h2, d2 = blob("during the outage")
            with pytest.raises(BlobStoreUnavailable, match="could not store"):
                store.snapshots.put_blobs({h2: d2})
            with pytest.raises(BlobStoreUnavailable, match="could not read"):
                store.snapshots.get_blobs([h])
            assert store.snapshots.missing_blobs([h2]) == {h2}  # nothing half-stored was trusted
            weed.start()
            assert store.snapshots.put_blobs({h2: d2}) == len(d2)
            assert store.snapshots.get_blobs([h, h2]) == {h: data, h2: d2}
        finally:
            store.close()


def test_a_pack_gone_from_the_bucket_is_lost_and_said_so_not_missing_from_the_database(
    objects: tuple[Store, str], backend: Backend, weed: Seaweed
) -> None:
    """Marked in the database, gone from the bucket (a lifecycle rule, a delete by hand):
    BlobStoreLost, naming the store and what to do — not "not stored" (MissingBlobs alone,
    which a saver answers by storing again)."""
    store, url = objects
    h, data = blob(b"soon gone from the bucket")
    kept, kept_data = blob(b"stays")
    store.snapshots.put_blobs({h: data})
    ((pack,),) = backend.query("SELECT pack FROM object_blobs WHERE hash = ?", (h,))
    weed.client().delete_object(Bucket=BUCKET, Key=Location.parse(url).key(pack))
    store.snapshots.put_blobs({kept: kept_data})
    with pytest.raises(BlobStoreLost) as e:
        store.snapshots.get_blobs([h, kept])
    assert e.value.code == "blob_store_lost" and e.value.hashes == {h}
    assert isinstance(e.value, MissingBlobs)  # what tolerates a missing image still does
    assert str(Location.parse(url)) in e.value.message and "restore the objects" in e.value.message
    assert store.snapshots.get_blobs([kept]) == {kept: kept_data}


def test_a_tool_steps_images_are_uploaded_within_its_transaction(
    objects: tuple[Store, str], backend: Backend, weed: Seaweed
) -> None:
    """What the recorder's FinishStep with images runs (store/steps/writes.py): the upload and its
    rows in the step's own transaction."""
    store, url = objects
    h, data = blob(b"\x89PNG not really an image, but bytes")
    write = store.db._write  # type: ignore[attr-defined]
    assert write(store.snapshots._put_blobs_tx({h: data}), Kind.RESULT) == len(data)  # type: ignore[attr-defined]
    assert store.snapshots.missing_blobs([h]) == set()
    assert store.snapshots.get_blobs([h]) == {h: data}
    assert h in contents(weed, url, backend)
    no_contents_in_db(backend)
