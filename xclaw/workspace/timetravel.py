"""Files follow memory (docs/architecture.md): the one place where a session's workspace is
snapshotted, rolled back and forked together with its record.

Runtime.rollback / Runtime.fork (and so the gateway's /rollback, /fork and the HTTP API) and
the offline `xclaw rollback` / `xclaw fork` all go through `Workspaces`. Every method blocks
(disk and database): call it from a worker thread.

Order of a rollback: complete any pending restore of the session; one store transaction
deletes the steps and journals the target workspace state; then the files are swapped in and
the journal row deleted (xclaw.workspace.restore). A crash between the two is completed by the
next `recover`, which runs before any run of the session, rollback or fork: nobody sees a mix.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from xclaw.store.base import RollbackResult, SnapshotStore
from xclaw.store.leases import Lease
from xclaw.store.model import Session, Step
from xclaw.store.snapshot_model import SnapshotInfo, WorkspaceRestore
from xclaw.workspace.restore import RestoreReport, complete_restore, remove_tree, restore_lock
from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter

if TYPE_CHECKING:
    from xclaw.config import Settings

# Side-effecting tools whose step is not snapshotted: a sub-agent's own tool steps are.
NO_SNAPSHOT_TOOLS = frozenset({"spawn_agent"})


class TimeTravelStore(SnapshotStore, Protocol):
    """What the workspaces need of the store: its snapshots (SnapshotStore), and the three
    record changes whose files they put back or take away in the same transaction."""

    def rollback(
        self,
        session_id: str,
        ref: str | int,
        *,
        workspace: WorkspaceRestore | None = None,
        lease: Lease | None = None,
    ) -> RollbackResult: ...

    def fork(
        self,
        session_id: str,
        ref: str | int,
        *,
        title: str | None = None,
        workspace: WorkspaceRestore | None = None,
    ) -> Session: ...

    def delete_session(self, session_id: str) -> None: ...


class Workspaces:
    """Per-session workspaces under `root`, with snapshots and restores through `store`."""

    def __init__(
        self,
        store: TimeTravelStore,
        root: Path,
        config: SnapshotConfig | None = None,
        snapshotter: Snapshotter | None = None,
    ) -> None:
        self.store = store
        self.root = Path(root)
        self.config = config = config or SnapshotConfig()
        self.snapshotter = snapshotter or Snapshotter(config)

    @classmethod
    def from_settings(
        cls, store: TimeTravelStore, settings: Settings, root: Path | None = None
    ) -> Workspaces:
        snapshots = SnapshotConfig.from_settings(settings.sandbox)
        return cls(store, root or settings.workspace_root, snapshots)

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def path(self, session_id: str) -> Path:
        return self.root / session_id

    # --- before a side effect -----------------------------------------------------------------
    def snapshot(self, session_id: str, step: Step) -> SnapshotInfo | None:
        """The workspace as it is before `step` runs, saved under the step's seq. Called after
        the step's write-ahead row is committed and before the tool starts."""
        if not self.enabled or step.name in NO_SNAPSHOT_TOOLS:
            return None
        return self.snapshotter.snapshot(self.store, session_id, step.seq, self.path(session_id))

    # --- restores -----------------------------------------------------------------------------
    def recover(self, session_id: str | None = None) -> list[RestoreReport]:
        """Complete the pending restores of one session (or of all): after this, its
        workspace is the state its record says."""
        if session_id is None:
            ids = sorted({p.session_id for p in self.store.pending_restores()})
        else:
            ids = [session_id] if self.store.pending_restores(session_id) else []
        reports = []
        for sid in ids:
            if self._nothing_to_copy(sid):
                continue
            with restore_lock(self.root):
                # Read again under the lock: another process may have completed it meanwhile.
                for pending in self.store.pending_restores(sid):
                    done = complete_restore(self.store, self.root, pending, self.config.crash_point)
                    reports.append(done)
            self.snapshotter.forget(self.path(sid))
        return reports

    def _nothing_to_copy(self, session_id: str) -> bool:
        """A fork of a session that never had files: finish its journal without creating
        anything (its workspace appears on its first run, as any new session's)."""
        pending = self.store.pending_restores(session_id)
        if not all(
            p.manifest is None
            and not (p.source_session_id and self.path(p.source_session_id).exists())
            for p in pending
        ):
            return False
        if self.path(session_id).exists():
            return False
        for p in pending:
            self.store.finish_restore(p.session_id, p.restore_id)
        return True

    def _request(self) -> WorkspaceRestore | None:
        return WorkspaceRestore(tuple(self.config.ignore)) if self.enabled else None

    def rollback(self, session_id: str, ref: str | int) -> RollbackResult:
        """Rollback with the files: the steps from `ref` on are deleted and the workspace goes
        back to its state just before `ref`."""
        self.recover(session_id)
        result = self.store.rollback(session_id, ref, workspace=self._request())
        if result.restore is not None:
            self.recover(session_id)
        return result

    def fork(self, session_id: str, ref: str | int, title: str | None = None) -> Session:
        """Fork with the files: the new session's workspace is the source's just after `ref`."""
        self.recover(session_id)  # the source's files must be what its record says
        new = self.store.fork(session_id, ref, title=title, workspace=self._request())
        self.recover(new.session_id)
        return new

    def delete(self, session_id: str) -> None:
        """The session and its steps go (snapshots and unreferenced blobs with them, in the
        store's transaction), then its files: nothing of a deleted session stays on disk."""
        self.store.delete_session(session_id)
        with restore_lock(self.root):
            remove_tree(self.path(session_id))
