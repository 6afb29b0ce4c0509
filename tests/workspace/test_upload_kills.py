"""A worker killed mid-upload leaves nothing half-referenced (store/blobs/objects.py).

A real process snapshots a changing workspace into PostgreSQL + a real SeaweedFS in a loop
and is SIGKILLed at growing delays, so kills land before, during and after its uploads and
its snapshot commits. After every kill: every content any snapshot references is in the
bucket and reads back; the next sweep (grace 0) removes only unreferenced objects.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.seaweed import aws_env, held, running_seaweed
from tests.store.conftest import PostgresBackend, postgres_url
from xclaw.store.base import Store

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from xclaw.store import open_store
    from xclaw.store.steps.model import NewStep, StepType
    from xclaw.store.steps.writes import BeginStep
    from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter

    import time
    db, url, ws, sid = sys.argv[1:5]
    store = open_store(db, blob_store=url, blob_grace_s=3600)
    if sys.argv[5:] == ["pause-before-save"]:  # the contents are up, the snapshot not yet
        save = store.snapshots.save_snapshot
        def paused(*args, **kwargs):
            print("uploaded", flush=True)
            time.sleep(60)
            return save(*args, **kwargs)
        store.snapshots.save_snapshot = paused
    print("ready", flush=True)
    snap = Snapshotter(SnapshotConfig(ignore=()))
    ws = Path(ws)
    n = 0
    while True:
        n += 1
        for i in range(20):  # 20 new contents of 40 KB per round
            (ws / f"f{(n * 20 + i) % 300}.bin").write_bytes(os.urandom(40_000))
        step = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "x"})))
        snap.snapshot(store.snapshots, sid, step.seq, ws)
        print("saved", step.seq, flush=True)
    """
)


def referenced(store: Store, sid: str) -> set[str]:
    hashes: set[str] = set()
    for info in store.snapshots.list_snapshots(sid):
        manifest = store.snapshots.get_snapshot(sid, info.seq) or {}
        hashes.update(e["hash"] for e in manifest.values() if "hash" in e)
    return hashes


def test_kills_during_uploads_leave_no_dangling_reference(tmp_path: Path) -> None:
    pg = PostgresBackend(postgres_url())
    with running_seaweed(tmp_path) as weed, aws_env(weed):
        url = weed.url()
        store = pg.open()
        store.snapshots.use_blob_store(url, grace_s=0.001)
        try:
            sid = store.record.create_session().session_id
            ws = tmp_path / "ws"
            ws.mkdir()
            child = tmp_path / "child.py"
            child.write_text(CHILD)
            env = {**os.environ, **weed.env}
            saved = 0
            orphans = 0  # packs no snapshot needs: uploads of a round the kill cut short
            # Timed from the moment the child is ready (its imports take seconds on a loaded
            # machine), and once right after a save it reported.
            for delay in (0.0, 0.3, 0.6, 0.9, 1.2, 1.6, 2.0, None):
                proc = subprocess.Popen(
                    [sys.executable, str(child), pg.url, url, str(ws), sid],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=env,
                    text=True,
                )
                assert proc.stdout is not None
                first = proc.stdout.readline().strip()
                assert first == "ready", first + proc.communicate(timeout=30)[0]
                if delay is None:
                    line = proc.stdout.readline()
                    assert line.startswith("saved"), line + proc.communicate(timeout=30)[0]
                    saved += 1
                else:
                    time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                saved += proc.communicate(timeout=30)[0].count("saved")
                # Every reference resolves to an object that is there, byte-exact.
                refs = referenced(store, sid)
                rows = pg.query("SELECT hash, pack FROM object_blobs")
                assert refs <= held(weed, url, rows)
                assert set(store.snapshots.get_blobs(refs)) == refs
                needed = {pack for h, pack in rows if h in refs}
                orphans = max(orphans, len(weed.objects(url) - needed))
            # And one kill placed exactly between the uploads and the snapshot's commit, where
            # timed kills land only by chance on a loaded machine.
            proc = subprocess.Popen(
                [sys.executable, str(child), pg.url, url, str(ws), sid, "pause-before-save"],
                stdout=subprocess.PIPE,
                env=env,
                text=True,
            )
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            assert proc.stdout.readline().strip() == "uploaded"
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            refs = referenced(store, sid)
            rows = pg.query("SELECT hash, pack FROM object_blobs")
            assert refs <= held(weed, url, rows)
            needed = {pack for h, pack in rows if h in refs}
            orphans = max(orphans, len(weed.objects(url) - needed))
            assert saved > 0, "the child never saved a snapshot: the kills proved nothing"
            assert orphans > 0, "no kill landed between an upload and its snapshot"
            assert pg.query("SELECT count(*) FROM blobs") == [(0,)]
            # The sweep takes what no snapshot names (uploads cut short, rounds never
            # committed) and nothing else.
            time.sleep(1.2)  # an object's time is the store's, in whole seconds
            store.snapshots.gc_blobs()
            refs = referenced(store, sid)
            rows = pg.query("SELECT hash, pack FROM object_blobs")
            assert {h for h, _ in rows} == refs  # every expired, unreferenced mark went
            assert weed.objects(url) == {pack for _, pack in rows}  # and every pack unnamed
            assert set(store.snapshots.get_blobs(refs)) == refs
        finally:
            store.close()
            pg.drop()
