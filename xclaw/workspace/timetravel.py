"""[workspace] Files follow memory (docs/architecture.md): the one place where a session's workspace
is snapshotted, rolled back and forked together with its record.

Runtime.rollback / Runtime.fork (and so the gateway's /rollback, /fork and the HTTP API) and
the offline `xclaw rollback` / `xclaw fork` all go through `Workspaces`. Every method blocks
(disk and database): call it from a worker thread.

Order of a rollback: complete any pending restore of the session; one store transaction
deletes the steps and journals the target workspace state; then the files are swapped in and
the journal row deleted (xclaw.workspace.restore). A crash between the two is completed by the
next `recover`, which runs before any run of the session, rollback or fork: nobody sees a mix.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from xclaw.errors import StepNotFound, StoreError, WorkspaceError
from xclaw.sandbox.paths import workspace_dir
from xclaw.store.base import LeaseStore, PlanDone, Record, RollbackResult, SnapshotStore
from xclaw.store.leases import Lease
from xclaw.store.snapshots.model import Manifest, PendingRestore, SnapshotInfo, WorkspaceRestore
from xclaw.store.steps.model import Session, Step
from xclaw.workspace.container_reaper import Reaped, reap
from xclaw.workspace.env_layer import ENV_PREFIX, EnvLayer, env_part, prefixed, workspace_part
from xclaw.workspace.in_place import restore_in_place
from xclaw.workspace.own_dir import recorded_dir
from xclaw.workspace.restore import RestoreReport, complete_restore, remove_tree, restore_lock
from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter

if TYPE_CHECKING:
    from xclaw.sandbox.container.lifecycle import ContainerInfo, Containers
    from xclaw.sandbox.setup import SandboxSetup

# Side-effecting tools whose step is not snapshotted: a sub-agent's own tool steps are.
NO_SNAPSHOT_TOOLS = frozenset({"spawn_agent"})


class TimeTravelStore(Protocol):
    """The roles the workspaces take: the snapshots, and the record, whose rollbacks, forks
    and deletions put back or take away files in the same transaction."""

    @property
    def snapshots(self) -> SnapshotStore: ...

    @property
    def record(self) -> Record: ...

    @property
    def leases(self) -> LeaseStore:
        """Who drives each session: the containers nobody runs are reaped."""
        ...


class Workspaces:
    """Per-session workspaces under `root`, with snapshots and restores through `store`."""

    def __init__(
        self,
        store: TimeTravelStore,
        root: Path,
        config: SnapshotConfig | None = None,
        snapshotter: Snapshotter | None = None,
        containers: Containers | None = None,
    ) -> None:
        self.store = store
        self.root = Path(root)
        config = config or SnapshotConfig()
        if containers is not None and f"/{ENV_PREFIX}" not in config.ignore:
            # The name the container's layer is recorded under: a workspace's own entry of
            # that name is not versioned (kept as it is by a rollback, as ignored paths are).
            config = replace(config, ignore=(*config.ignore, f"/{ENV_PREFIX}"))
        self.config = config
        self.snapshotter = snapshotter or Snapshotter(config)
        # Per session: the snapshot this process last saw its local directory match. A
        # directory is trusted as the session's state only while that is the latest one.
        self._synced: dict[str, int] = {}
        # `sandbox.isolation: container`: each session's container, whose own file-system
        # changes are captured with every snapshot and rewound with the workspace
        # (env_layer.py, docs/containers.md); the snapshot its layer last matched; what the
        # last rollback did to its processes, for the announcement.
        self.containers = containers
        self.env = EnvLayer(config.max_file_bytes, config.max_total_bytes)
        self._env_synced: dict[str, int] = {}
        self.env_notes: dict[str, str] = {}
        self._rewound: dict[str, bool] = {}
        self._gone_stopped: dict[str, int] = {}  # processes of removed steps stopped (rollback)
        self.container_grace_s = 900.0  # sandbox.container_grace_s (from_settings)
        if containers is not None:
            self.snapshotter.reserved = ENV_PREFIX
            containers.layer_for = self._layer_for
            containers.crash_point = config.crash_point
        # Per session: its own directory (xclaw/workspace/own_dir.py), or None for the
        # default one. Recorded when the session is created and never changed: read once.
        self._own: dict[str, Path | None] = {}

    @classmethod
    def from_settings(
        cls, store: TimeTravelStore, setup: SandboxSetup, root: Path | None = None
    ) -> Workspaces:
        """The workspaces under `root` (by default the setup's workspace root), snapshotted
        and contained as the sandbox's setup says (`Settings.sandbox_setup()`)."""
        snapshots = SnapshotConfig.from_settings(setup.sandbox)
        containers = None
        if setup.sandbox.isolation == "container":
            from xclaw.sandbox.container.shared import containers_for

            containers = containers_for(setup, root)
        where = root or setup.workspace_root
        if where is None:
            raise WorkspaceError("no workspace root: the sandbox's setup names none")
        made = cls(store, where, snapshots, containers=containers)
        made.container_grace_s = setup.sandbox.container_grace_s
        return made

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def follows(self) -> bool:
        """Whether the workspace follows the session between workers: with an object store
        (blob_store) the root is a local cache of the session's committed state."""
        return self.enabled and not self.store.snapshots.blobs.in_database

    @property
    def records_after(self) -> bool:
        """Whether what each side-effecting step changed is recorded once it ends
        (`snapshot_after`): when the workspace follows the session, and for a session's
        container, whose layer a worker starting again must find as the last step left it."""
        return self.follows or (self.enabled and self.containers is not None)

    def path(self, session_id: str) -> Path:
        """Where the session's files are: its own directory (an editor's project), or
        `root/<session id>`."""
        own = self.own_dir(session_id)
        return own if own is not None else self.root / session_id

    def own_dir(self, session_id: str) -> Path | None:
        """The directory of its own the session works in, as its record says; None for the
        default workspace (and for a session not written yet)."""
        if session_id in self._own:
            return self._own[session_id]
        session = self.store.record.find_session(session_id)
        if session is None:
            return None
        own = self._own[session_id] = recorded_dir(session.metadata)
        return own

    def directory(self, session_id: str) -> Path:
        """The directory the session's tools work in: its own one, which must still exist,
        or the default one, created private (0700) when missing."""
        own = self.own_dir(session_id)
        if own is None:
            return workspace_dir(self.root, session_id)
        if not own.is_dir():
            raise WorkspaceError(
                f"the directory of session {session_id} ({own}) does not exist any more; "
                "restore it, or fork the session (a fork has a workspace of its own)"
            )
        return own

    # --- before a side effect -----------------------------------------------------------------
    def snapshot(
        self, session_id: str, step: Step, lease: Lease | None = None
    ) -> SnapshotInfo | None:
        """The workspace as it is before `step` runs, saved under the step's seq. Called after
        the step's write-ahead row is committed and before the tool starts. Fenced by
        `lease` (the run's): a worker that lost the session references nothing."""
        if not self.enabled or step.name in NO_SNAPSHOT_TOOLS:
            return None
        if self.containers is not None:
            self.containers.note_step(session_id, step.seq)
            if lease is not None:
                self.containers.note_epoch(session_id, lease.token, lease.owner)
        info = self.snapshotter.snapshot(
            self.store.snapshots,
            session_id,
            step.seq,
            self.path(session_id),
            lease=lease,
            replace=True,
            extra=self._env_extra(session_id),
        )
        self._synced[session_id] = info.seq
        self._env_synced[session_id] = info.seq
        return info

    def snapshot_after(
        self, session_id: str, step: Step, lease: Lease | None = None
    ) -> SnapshotInfo | None:
        """When the workspace follows the session: what `step` changed, recorded as the
        state before the step after it (seq + 1), so a worker taking the session over finds
        the files this one wrote. Incremental: only contents the store lacks are sent. A
        snapshot a sibling's next step saved there first is left as it is (it saw this
        step's effects: the step had ended)."""
        if not self.records_after or step.name in NO_SNAPSHOT_TOOLS:
            return None
        ws = self.path(session_id)
        try:
            info = self.snapshotter.snapshot(
                self.store.snapshots,
                session_id,
                step.seq + 1,
                ws,
                lease=lease,
                extra=self._env_extra(session_id),
            )
        except StoreError as e:
            if "already has a snapshot" not in e.message:
                raise
            return None
        self._synced[session_id] = info.seq
        self._env_synced[session_id] = info.seq
        return info

    # --- a session's container (docs/containers.md) ----------------------------------------------
    def _env_extra(
        self, session_id: str
    ) -> Callable[[SnapshotStore, bool], tuple[Manifest, int]] | None:
        """The container layer's entries for a snapshot: captured from the container when it
        runs here, else carried over from the session's latest snapshot (nothing ran in it
        since: it is not running)."""
        containers = self.containers
        if containers is None:
            return None

        def extra(store: SnapshotStore, retrying: bool) -> tuple[Manifest, int]:
            info = containers.running_info(session_id)
            if info is None:
                return prefixed(self._latest_env(session_id)), 0
            if retrying:
                self.env.forget(info.upper)
            entries, added = self.env.capture(store, info.upper)
            return prefixed(entries), added

        return extra

    def _latest_env(self, session_id: str) -> Manifest:
        infos = self.store.snapshots.list_snapshots(session_id)
        if not infos:
            return {}
        return env_part(self.store.snapshots.get_snapshot(session_id, infos[-1].seq))

    def _layer_for(self, session_id: str) -> Callable[[ContainerInfo], None] | None:
        """What a container made anew for the session starts with: the layer of its latest
        snapshot (a fork's, a session that moved here, one whose container was removed)."""
        target = self._latest_env(session_id)
        if not target:
            return None

        def write(info: ContainerInfo) -> None:
            self.env.write(info.upper, target, self.store.snapshots.get_blobs)

        return write

    def _fence(self, session_id: str, lease: Lease | None) -> None:
        """The session's container, if it has one here, adopted under the run's epoch: what
        another worker started in it under an older one is killed (started again if it was
        stopped)."""
        containers = self.containers
        if containers is None or containers.inspect(session_id) is None:
            return
        from xclaw.sandbox.paths import workspace_dir

        ws = workspace_dir(self.root, session_id)
        if lease is None:
            containers.ensure(session_id, ws, None)
        else:
            containers.ensure(session_id, ws, lease.token, owner=lease.owner)
        # Started by steps the record no longer has (a rollback another worker made while
        # the container stayed here): stopped, as that rollback would have.
        gone = set()
        for seq in {p.seq for p in containers.processes(session_id) if p.seq is not None}:
            try:
                self.store.record.get_step(session_id, seq)
            except StepNotFound:
                gone.add(seq)
        if gone:
            stopped = containers.stop_steps(session_id, gone)
            self._gone_stopped[session_id] = self._gone_stopped.get(session_id, 0) + stopped

    def _env_sync(self, session_id: str, lease: Lease | None) -> bool:
        """After the workspace is right: the session's container layer made its latest
        recorded one, unless this process recorded that very state (then the container may
        be ahead: its own newer writes). True: rewound (its processes were stopped)."""
        containers = self.containers
        if containers is None:
            return False
        info = containers.running_info(session_id)
        if info is None:
            return False
        from xclaw.sandbox.paths import workspace_dir

        ws = workspace_dir(self.root, session_id)
        infos = self.store.snapshots.list_snapshots(session_id)
        if not infos:
            return False
        latest = infos[-1].seq
        if self._env_synced.get(session_id) == latest:
            return False
        target = env_part(self.store.snapshots.get_snapshot(session_id, latest))
        here, _ = self.env.capture(None, info.upper)
        if _layer_view(here) == _layer_view(target):
            self._env_synced[session_id] = latest
            return False

        def write(now: ContainerInfo) -> None:
            self.config.crash_point("env.stopped")
            self.env.write(
                now.upper, target, self.store.snapshots.get_blobs, self.config.crash_point
            )

        containers.rewind(session_id, ws, write)
        self._env_synced[session_id] = latest
        self._rewound[session_id] = True
        return True

    def _catch_up(
        self, session_id: str, latest: int, manifest: Manifest, lease: Lease | None
    ) -> None:
        """This worker's directory holds writes no snapshot recorded (the upload after a
        step failed: the store was down): record them now, as the state before the next
        step, so they are not lost if the session moves."""
        ws = self.path(session_id)
        if _versioned(self.snapshotter.capture(ws)) == _versioned(manifest):
            return
        last = self.store.record.latest_steps(session_id, 1)
        seq = max([latest, *(s.seq for s in last)]) + 1
        info = self.snapshotter.snapshot(self.store.snapshots, session_id, seq, ws, lease=lease)
        self._synced[session_id] = info.seq

    def sync(self, session_id: str, lease: Lease | None = None) -> RestoreReport | None:
        """When the workspace follows the session: make the local directory the session's
        latest committed state, unless this process last synced it with that very state
        (then it holds at least that, maybe this worker's own newer writes). Called before
        anything uses the workspace (`recover`)."""
        if self.own_dir(session_id) is not None:
            return None  # an editor's project is on this machine; it follows no session
        infos = self.store.snapshots.list_snapshots(session_id)
        if not infos:
            return None
        latest = infos[-1].seq
        ws = self.path(session_id)
        manifest = self.store.snapshots.get_snapshot(session_id, latest)
        if manifest is None:  # rolled back meanwhile: the next run syncs again
            return None
        if self._synced.get(session_id) == latest and ws.is_dir():
            self._catch_up(session_id, latest, manifest, lease)
            return None
        here = self.snapshotter.capture(ws) if ws.is_dir() else {}
        if ws.is_dir() and _versioned(here) == _versioned(manifest):
            self._synced[session_id] = latest
            return None
        pending = PendingRestore(
            session_id,
            f"sync-{secrets.token_hex(8)}",  # journaled nowhere: finishing it is a no-op
            "rollback",  # unversioned paths (ignored, skipped) stay, as on a rollback
            None,
            latest,
            manifest,
            tuple(self.config.ignore),
            0,
        )
        written: dict[str, os.stat_result] = {}
        with restore_lock(self.root):
            # Contents the stale directory already holds are read from it, not fetched: a
            # worker coming back to a session downloads what changed since, not everything.
            local = {e["hash"]: ws / p for p, e in here.items() if "hash" in e}
            report = complete_restore(
                self.store.snapshots,
                self.root,
                pending,
                self.config.crash_point,
                written,
                partial(_local_first, self.store.snapshots, local),
            )
        self.snapshotter.forget(ws)
        self.snapshotter.prime(ws, manifest, written)
        self._synced[session_id] = latest
        return report

    # --- restores -----------------------------------------------------------------------------
    def recover(
        self, session_id: str | None = None, lease: Lease | None = None
    ) -> list[RestoreReport]:
        """Complete the pending restores of one session (or of all): after this, its
        workspace is the state its record says. When the workspace follows the session,
        also sync it with the latest committed snapshot (`sync`, fenced by `lease`). A
        session's container, if it has one here, is adopted first, before any file is
        touched: the processes another worker started in it under an older epoch are killed
        (fencing); its layer is made the session's latest recorded one last (`_env_sync`)."""
        if session_id is not None and self.containers is not None:
            self._fence(session_id, lease)
        if session_id is None:
            ids = sorted({p.session_id for p in self.store.snapshots.pending_restores()})
        else:
            ids = [session_id] if self.store.snapshots.pending_restores(session_id) else []
        reports = []
        for sid in ids:
            if self._nothing_to_copy(sid):
                continue
            with restore_lock(self.root):
                # Read again under the lock: another process may have completed it meanwhile.
                pendings = self.store.snapshots.pending_restores(sid)
                for pending in pendings:
                    reports.append(self._complete(pending))
            if self.own_dir(sid) is None:  # (rewound in place: unchanged files kept their stat)
                self.snapshotter.forget(self.path(sid))
            last = pendings[-1] if pendings else None
            if self.follows and last is not None and last.manifest is not None:
                # The files are that snapshot's: trusted without reading them again.
                self.snapshotter.prime(self.path(sid), last.manifest)
        if session_id is not None and self.follows:
            synced = self.sync(session_id, lease)
            if synced is not None:
                reports.append(synced)
        if session_id is not None and self.containers is not None:
            if reports:  # the workspace was replaced: the container's layer is checked too
                self._env_synced.pop(session_id, None)
            self._env_sync(session_id, lease)
        return reports

    def _complete(self, pending: PendingRestore) -> RestoreReport:
        """One journaled restore: in place for a session's own directory, else built beside
        the workspace and swapped in (a fork's source may be a session's own directory)."""
        own = self.own_dir(pending.session_id)
        if own is not None:
            current = self.snapshotter.capture(own) if own.is_dir() else {}
            return restore_in_place(
                self.store.snapshots, own, pending, current, self.config.crash_point
            )
        source = pending.source_session_id
        return complete_restore(
            self.store.snapshots,
            self.root,
            pending,
            self.config.crash_point,
            source_dir=None if source is None else self.path(source),
        )

    def _nothing_to_copy(self, session_id: str) -> bool:
        """A fork of a session that never had files: finish its journal without creating
        anything (its workspace appears on its first run, as any new session's)."""
        pending = self.store.snapshots.pending_restores(session_id)
        if not all(
            p.manifest is None
            and not (p.source_session_id and self.path(p.source_session_id).exists())
            for p in pending
        ):
            return False
        if self.path(session_id).exists():
            return False
        for p in pending:
            self.store.snapshots.finish_restore(p.session_id, p.restore_id)
        return True

    def _request(self) -> WorkspaceRestore | None:
        if not self.enabled:
            return None
        # A container's layer is synced to the session's latest snapshot: the restored state
        # must stay as that (as when the workspace follows the session).
        keep = self.follows or self.containers is not None
        return WorkspaceRestore(tuple(self.config.ignore), keep_state=keep)

    def rollback(
        self, session_id: str, ref: str | int, plan: PlanDone | None = None
    ) -> RollbackResult:
        """Rollback with the files: the steps from `ref` on are deleted and the workspace goes
        back to its state just before `ref`; `plan`, the compensating rollback's plan this
        rewind completes (xclaw/runtime/rollbacks.py)."""
        self.recover(session_id)
        self._rewound.pop(session_id, None)
        self._gone_stopped.pop(session_id, None)
        result = self.store.record.rollback(session_id, ref, workspace=self._request(), plan=plan)
        if result.restore is not None:
            self._env_synced.pop(session_id, None)
            self.recover(session_id)
        if self.containers is not None:
            self._after_rollback(session_id, result)
        return result

    def _after_rollback(self, session_id: str, result: RollbackResult) -> None:
        """The container's processes after a rollback, said once (`env_notes`): rewound with
        its file system (all stopped), or those the removed steps started stopped."""
        assert self.containers is not None
        step = f"s{result.target_seq:04d}"
        if self.containers.inspect(session_id) is None:
            self.env_notes.pop(session_id, None)
            return
        if self._rewound.pop(session_id, False):
            note = (
                f"the session's container: its file system is back as it was before {step}; it was "
                "restarted to get there, so every process in it stopped (processes are not "
                "restored by a rollback)"
            )
        else:
            stopped = self.containers.stop_from(session_id, result.target_seq)
            stopped += self._gone_stopped.pop(session_id, 0)
            note = (
                f"the session's container: {stopped} process(es) started at or after {step} stopped; "
                "processes started before it keep running (processes are not restored by a "
                "rollback)"
            )
        self.env_notes[session_id] = note

    def fork(
        self,
        session_id: str,
        ref: str | int,
        title: str | None = None,
        *,
        new_session_id: str | None = None,
    ) -> Session:
        """Fork with the files: the new session's workspace is the source's just after `ref`."""
        self.recover(session_id)  # the source's files must be what its record says
        new = self.store.record.fork(
            session_id, ref, title=title, workspace=self._request(), new_session_id=new_session_id
        )
        self.recover(new.session_id)
        return new

    def reap_containers(self, *, dry_run: bool = False) -> list[Reaped]:
        """The containers of this root that nobody runs, stopped or removed (container_reaper)."""
        if self.containers is None:
            return []
        return reap(self.store, self.containers, self.container_grace_s, dry_run=dry_run)

    def delete(self, session_id: str) -> None:
        """The session and its steps go (snapshots and unreferenced blobs with them, in the
        store's transaction), then its files: nothing of a deleted session stays on disk."""
        own = self.own_dir(session_id)
        self.store.record.delete_session(session_id)
        if self.containers is not None:
            self.containers.remove(session_id)
        self._own.pop(session_id, None)
        if own is not None:
            # An editor's project is the user's, not xclaw's: it stays, files and all.
            self.snapshotter.forget(own)
            return
        with restore_lock(self.root):
            remove_tree(self.path(session_id))


def _versioned(manifest: Manifest) -> Manifest:
    """What a snapshot versions of the workspace: every entry but the skipped ones (left as
    they are) and a container's layer (env_layer.py)."""
    return {p: e for p, e in workspace_part(manifest).items() if "skipped" not in e}


def _layer_view(layer: Manifest) -> Manifest:
    """What of a container layer two captures must share to show the same file system: its
    files, links, whiteouts and opaque directories (a plain directory copied up only to
    hold them, podman's own included, changes nothing seen)."""
    return {
        p: e
        for p, e in layer.items()
        if not ("dir" in e and not e.get("opaque")) and ("skipped" not in e or e.get("whiteout"))
    }


def _local_first(
    store: SnapshotStore, local: dict[str, Path], hashes: list[str]
) -> dict[str, bytes]:
    """Contents read from the files of a stale workspace where it has them (each checked
    against its hash, read without following links), the rest from the store."""
    found: dict[str, bytes] = {}
    for h in hashes:
        path = local.get(h)
        if path is None:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read()
        finally:
            os.close(fd)
        if hashlib.sha256(data).hexdigest() == h:
            found[h] = data
    rest = [h for h in hashes if h not in found]
    if rest:
        found.update(store.get_blobs(rest))
    return found
