"""[store] StoreBase: the half of the record role (store/steps/record.py) both backends share.

The public step and time-travel methods live here: argument normalisation, the step methods as
the write values of store/steps/writes.py applied one at a time (their durability is that module's
table), the opening of a turn, the status decisions around steps and approvals, and the step
tree. A backend's record (SqliteRecord, PgRecord) supplies only its SQL, through a few private
primitives (`_insert_step_tx`, `_finish_step_tx`); the connections are the connection layer's
(store/role.py). The contract stays the `Record` protocol in xclaw.store.base.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import AmbiguousSession, MessageRecorded, SessionNotFound
from xclaw.people.teams import Need, ShareRole, allows
from xclaw.store.base import PlanDone, RollbackResult
from xclaw.store.dialect import Dialect
from xclaw.store.leases import Lease
from xclaw.store.queue.sql import dequeue_tx
from xclaw.store.role import Role
from xclaw.store.snapshots.model import (
    WorkspaceRestore,
)
from xclaw.store.steps.model import (
    Completion,
    NewStep,
    Session,
    SessionEvent,
    Status,
    Step,
    StepStatus,
    StepTreeNode,
    StepType,
    event_for_target,
    full_step_id,
    is_approval,
    parse_step_ref,
)
from xclaw.store.steps.rows import STEP_COLS, STEPS, row_to_step
from xclaw.store.steps.timetravel import fork_tx, rollback_tx
from xclaw.store.steps.writes import (
    Fork,
    MarkInterrupted,
    OpenTurn,
    Rollback,
    Transition,
    normalise_step,
)
from xclaw.store.teams.sql import CLAIM_SQL, ROLE_SQL

if TYPE_CHECKING:
    from xclaw.store.role import Db
    from xclaw.store.snapshots.sql import SnapshotMethods
    from xclaw.store.steps.stream import WriteStream
    from xclaw.store.steps.writes import LeaseBodies

T = TypeVar("T")
R = TypeVar("R")


# The columns a caller gives a new step (NewStep's fields named as Step columns, but the
# parent, which the store checks and writes in full).
_GIVEN = tuple(f.name for f in fields(NewStep) if f.name != "parent_step_id")
_new_step = STEPS.maker(
    "session_id, seq, parent, step, status, output_data, error_message, now",
    {
        "step_id": "_full_step_id(session_id, seq)",
        "session_id": "session_id",
        "seq": "seq",
        "parent_step_id": "parent",
        "status": "status",
        "output_data": "output_data",
        "error_message": "error_message",
        "start_time": "now",
        "end_time": "None if status is _RUNNING else now",
        **{name: f"step.{name}" for name in _GIVEN},
    },
    {"_full_step_id": full_step_id, "_RUNNING": StepStatus.RUNNING},
)


def new_step(
    session_id: str,
    seq: int,
    parent: str | None,
    step: NewStep,
    status: StepStatus,
    output_data: Any,
    error_message: str | None,
    now: int,
) -> Step:
    """The row a backend inserts for a new step (and returns once it is inserted); every
    other column at its declared default."""
    return _new_step(session_id, seq, parent, step, status, output_data, error_message, now)


def encoded_json(
    step: NewStep, output_data: Any, dump: Callable[[Any, str], str | None]
) -> Callable[[Any, str], str | None]:
    """A new step's JSON columns encoded now, outside its transaction: the `json(value,
    field)` its row's parameters are made with (columns.Table.params) in the transaction."""
    texts = {
        "input_data": dump(step.input_data, "input_data"),
        "output_data": dump(output_data, "output_data"),
    }
    return lambda _value, field: texts[field]


def moves_session(step: NewStep, status: StepStatus) -> bool:
    """A BeginStep moves the session; an AddStep only does for user input."""
    return status is StepStatus.RUNNING or step.step_type is StepType.USER_INPUT


def event_of_new_step(
    current: Status, step: NewStep, approval_pending: Callable[[], bool]
) -> SessionEvent:
    """What a new step does to its session (model.next_status decides the status): a pending
    approval asks; any other step runs it, beside another approval still pending (parallel
    sub-agents: a Paused session stays Paused)."""
    if is_approval(step.step_type, step.name):
        return SessionEvent.APPROVAL_ASKED
    if current is Status.PAUSED and approval_pending():
        return SessionEvent.STEP_BESIDE_APPROVAL
    return SessionEvent.RUN_STARTED


def cancel_event(target: Status, awaiting_input: bool) -> SessionEvent | None:
    """`Store.transition(..., awaiting_input=True)`: a cancelled run, which only goes Running."""
    if not awaiting_input:
        return None
    if target is not Status.RUNNING:
        raise ValueError(f"awaiting_input goes with Running, not {target.value}")
    return SessionEvent.RUN_CANCELLED


def event_of_answer(
    wanted: Status | None,
    step: Step,
    current: Callable[[], Status],
    approval_pending: Callable[[], bool],
) -> SessionEvent | None:
    """What a finished step does to its session (None: nothing): the move the caller asked
    for (a final answer, a failed run), else, when the last pending approval of a Paused
    session was answered, APPROVAL_ANSWERED. `current` is read only when needed."""
    if wanted is not None:
        return event_for_target(current(), wanted)
    if (
        is_approval(step.step_type, step.name)
        and current() is Status.PAUSED
        and not approval_pending()
    ):
        return SessionEvent.APPROVAL_ANSWERED
    return None


# The user_input steps that may hold a message id (the LIKE only narrows; the id is compared
# once decoded): such a step's output is {"messageId": ID, "by"?: …, "queued"?: true} (docs/protocol.md).
_MESSAGE_STEPS = (
    f"SELECT {STEP_COLS} FROM traces WHERE session_id=? AND step_type='user_input'"
    " AND CAST(output_data AS TEXT) LIKE ? ORDER BY seq DESC"
)
# The session's latest message: what a write that opens a turn checks (a few rows back).
LATEST_MESSAGE = (
    f"SELECT {STEP_COLS} FROM traces WHERE session_id=? AND step_type='user_input'"
    " ORDER BY seq DESC LIMIT 1"
)


def message_step_tx(
    d: Dialect, conn: Any, session_id: str, message_id: str, *, latest: bool = False
) -> Step | None:
    """The user_input step of `session_id` recorded with the client's `message_id`, read in
    the open transaction of `conn`: among all its messages, or (`latest`) its last one only —
    what the write opening a turn checks, after the runtime looked at them all (a resend
    recorded in between is the last message: its run holds the lease until it ends)."""
    if latest:
        rows = conn.execute(d.sql(LATEST_MESSAGE), (session_id,))
    else:
        rows = conn.execute(d.sql(_MESSAGE_STEPS), (session_id, f"%{message_id}%"))
    return message_among(rows, message_id)


def message_among(rows: Iterable[Any], message_id: str) -> Step | None:
    """The step among these `traces` rows recorded with the client's `message_id`."""
    for row in rows:
        step = row_to_step(row)
        out = step.output_data
        if isinstance(out, dict) and out.get("messageId") == message_id:
            return step
    return None


def build_tree(flat: list[Step]) -> list[StepTreeNode]:
    """Roots with their descendants, in sequence order. Parents come before their children,
    so building from the last step backwards completes every subtree before its root (no
    recursion: trees may be deep)."""
    by_id = {s.step_id: s for s in flat}
    children: dict[str, list[StepTreeNode]] = {}
    roots: list[StepTreeNode] = []
    for s in reversed(flat):
        node = StepTreeNode(s, tuple(reversed(children.pop(s.step_id, []))))
        parent = by_id.get(s.parent_step_id) if s.parent_step_id else None
        if parent is not None and parent.seq < s.seq:
            children.setdefault(parent.step_id, []).append(node)
        else:
            roots.append(node)
    roots.reverse()
    return roots


class StoreBase(Role):
    """The backend-independent half of the record role (store/steps/record.py). A backend's
    record implements the private primitives below with its own SQL, one transaction each;
    `leases` gives the lease body a turn's opening takes, `snapshots` the blob body of an
    import."""

    def __init__(self, db: Db, *, leases: LeaseBodies, snapshots: SnapshotMethods) -> None:
        super().__init__(db)
        self._leases = leases
        self._snapshots = snapshots

    @property
    def commits(self) -> int:
        return self._db.commits

    @property
    def writer_busy_s(self) -> float | None:
        return self._db.writer_busy_s

    def write_stream(self, lease: Lease | None = None) -> WriteStream:
        return self._db.write_stream(lease)

    if TYPE_CHECKING:  # the bodies of the record's other parts (steps/sql.py)

        def _create_session_tx(
            self, sid: str, title: str, metadata: Mapping[str, Any] | None
        ) -> Callable[[Any], Session | None]: ...

        def _update_session_tx(
            self,
            session_id: str,
            title: str | None,
            metadata: Mapping[str, Any] | None,
            *,
            merge: bool = False,
        ) -> Callable[[Any], Session]: ...

        def _mark_interrupted_tx(
            self,
            session_id: str,
            keep_approvals: bool,
            approval_output: Mapping[str, Any] | None,
            lease: Lease | None,
        ) -> Callable[[Any], list[Step]]: ...

        def list_sessions(self, *, limit: int | None = None) -> list[Session]: ...

    def resolve_session(self, ref: str) -> Session:
        """The session `ref` names: its full id, or a unique prefix of one (as git takes
        abbreviated commits). Raises SessionNotFound, or AmbiguousSession listing the
        candidates."""
        ref = ref.strip()
        exact = self.find_session(ref)
        if exact is not None:
            return exact
        if not ref:
            raise SessionNotFound(ref)
        matches = [s for s in self.list_sessions() if s.session_id.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousSession(ref, [s.session_id for s in matches])
        raise SessionNotFound(ref)

    # --- primitives a backend implements: transaction bodies (writes.TxBodies) ----------------
    def _insert_step_tx(
        self,
        session_id: str,
        step: NewStep,
        status: StepStatus,
        output_data: Any,
        error_message: str | None,
        lease: Lease | None,
    ) -> Callable[[Any], Step]:
        """Insert a normalised step (moving the session as `moves_session` says)."""
        raise NotImplementedError

    def _finish_step_tx(
        self,
        session_id: str,
        seq: int,
        ref: int | str,
        done: Completion,
        wanted: Status | None,
        lease: Lease | None,
    ) -> Callable[[Any], Step]:
        """running -> `done.status`, then the session as `event_of_answer` says."""
        raise NotImplementedError

    def _open_turn_tx(
        self, w: OpenTurn
    ) -> Callable[[Any], tuple[Lease | None, list[Step], Step | None]]:
        """writes.OpenTurn's transaction, made of the bodies of the store calls it stands for
        (CreateSession, UpdateSession, AcquireLease, MarkInterrupted, AddStep)."""
        sid, message = w.session_id, normalise_step(w.message)
        create = self._create_session_tx(sid, w.title or "", w.metadata) if w.create else None
        retitle = None if w.title is None else self._update_session_tx(sid, w.title, None)
        merge = (
            None
            if w.metadata is None
            else self._update_session_tx(sid, None, w.metadata, merge=True)
        )
        acquire = self._leases._acquire_lease_tx(sid, w.worker_id, w.ttl_s)

        d, now = self._dialect, self._now()
        # The message step's output: who sent it (a team member), the client's id for it.
        output = w.output()

        def tx(conn: Any) -> tuple[Lease | None, list[Step], Step | None]:
            # Created by another socket a moment ago: retitled instead.
            created = create is not None and create(conn) is not None
            if created and w.owner is not None:
                conn.execute(d.sql(CLAIM_SQL), (sid, w.owner, None, now))
            elif not created and w.member:
                row = conn.execute(d.sql(ROLE_SQL), (sid, w.owner or "")).fetchone()
                if row is None or not allows(ShareRole(row[0]), Need.ACT):
                    raise SessionNotFound(sid)  # nothing written: the transaction rolls back
            if not created and retitle is not None:
                retitle(conn)
            lease = acquire(conn)
            if lease is None:  # another live worker drives it
                return None, [], None
            if w.message_id is not None and not created:
                # A resend of a message recorded already: nothing written (the lease taken
                # above rolls back with the rest), never run twice.
                earlier = message_step_tx(d, conn, sid, w.message_id, latest=True)
                if earlier is not None:
                    raise MessageRecorded(earlier.seq)
            if not created and merge is not None:
                merge(conn)
            # A session this very transaction created has no step to settle.
            interrupted = (
                []
                if created
                else self._mark_interrupted_tx(sid, w.keep_approvals, w.approval_output, lease)(
                    conn
                )
            )
            added = self._insert_step_tx(sid, message, StepStatus.COMPLETED, output, None, lease)
            if w.dequeue and w.message_id is not None:  # it leaves the queue as it is recorded
                dequeue_tx(d, conn, sid, w.message_id)
            return lease, interrupted, added(conn)

        return tx

    def _rollback_tx(self, w: Rollback, lease: Lease | None) -> Callable[[Any], RollbackResult]:
        """writes.Rollback's transaction, the body shared (store/steps/timetravel.py)."""
        d, sid, ref = self._dialect, w.session_id, w.ref
        seq = parse_step_ref(ref, sid)
        return lambda conn: rollback_tx(
            d, conn, sid, seq, ref, self._now(), w.workspace, lease=lease, plan=w.plan
        )

    def _fork_tx(self, w: Fork) -> Callable[[Any], Session]:
        """writes.Fork's transaction, the body shared (store/steps/timetravel.py)."""
        d, sid, ref = self._dialect, w.session_id, w.ref
        seq = parse_step_ref(ref, sid)
        return lambda conn: fork_tx(
            d, conn, sid, seq, ref, w.new_session_id, w.title, self._now(), w.workspace
        )

    def find_session(self, session_id: str) -> Session | None:
        raise NotImplementedError

    def steps(
        self,
        session_id: str,
        *,
        agent: str | None = None,
        statuses: Iterable[StepStatus] | None = None,
        after_seq: int = 0,
    ) -> list[Step]:
        raise NotImplementedError

    # --- shared -----------------------------------------------------------------------------
    def get_session(self, session_id: str) -> Session:
        found = self.find_session(session_id)
        if found is None:
            raise SessionNotFound(session_id)
        return found

    def step_tree(self, session_id: str) -> list[StepTreeNode]:
        return build_tree(self.steps(session_id))

    # --- the store's writes as methods: each builds its value and applies it (write) -----
    def transition(
        self,
        session_id: str,
        target: Status,
        *,
        lease: Lease | None = None,
        awaiting_input: bool = False,
    ) -> Session:
        w = Transition(session_id=session_id, target=Status(target), awaiting_input=awaiting_input)
        return self.write(w, lease)

    def mark_interrupted(
        self,
        session_id: str,
        *,
        keep_approvals: bool = True,
        approval_output: Mapping[str, Any] | None = None,
        lease: Lease | None = None,
    ) -> list[Step]:
        w = MarkInterrupted(
            session_id=session_id, keep_approvals=keep_approvals, approval_output=approval_output
        )
        return self.write(w, lease)

    def rollback(
        self,
        session_id: str,
        ref: str | int,
        *,
        workspace: WorkspaceRestore | None = None,
        lease: Lease | None = None,
        plan: PlanDone | None = None,
    ) -> RollbackResult:
        w = Rollback(session_id=session_id, ref=ref, workspace=workspace, plan=plan)
        return self.write(w, lease)

    def fork(
        self,
        session_id: str,
        ref: str | int,
        *,
        title: str | None = None,
        workspace: WorkspaceRestore | None = None,
        new_session_id: str | None = None,
    ) -> Session:
        w = Fork(session_id=session_id, ref=ref, title=title, workspace=workspace)
        if new_session_id is not None:
            # A schedule's fork gives its own, as unguessable (derived from its secret seed).
            w = replace(w, new_session_id=new_session_id)
        return self.write(w)
