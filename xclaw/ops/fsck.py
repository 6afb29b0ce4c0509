"""[ops] `xclaw fsck`: every invariant of a database checked from its rows, and the safe repairs.

The checks read through the Store protocol and xclaw.store.fsck_rows.FsckAccess (raw rows the
protocol's values leave out) and know nothing of SQL. A finding names the rule it breaks
(`code`), where (session, step) and what it means. `error` findings make fsck fail; `info`
findings (blobs nobody refers to, a restore still pending) are normal after a crash and
fixed by the runtime itself, and are listed only. A finding with a `repair` can be fixed by
`--repair`: all of them in one transaction, after a full backup, each repair's SQL checking
its own condition again. Sessions a live worker drives right now (an unexpired lease) are
never repaired: their running steps and status are that worker's business.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from xclaw.store.base import Store
from xclaw.store.fsck_rows import (
    FsckAccess,
    FsckReader,
    Repair,
    SessionRow,
    SnapshotRow,
    fsck_access,
)
from xclaw.store.snapshots.model import (
    Manifest,
    apply_delta,
    check_entry,
    content_hash,
    decode_blob,
    hashes_of,
)
from xclaw.store.steps.model import (
    APPROVAL_STEP_NAME,
    INTERRUPTED,
    MAIN_AGENT,
    ROLLBACK_PLAN,
    Status,
    Step,
    StepStatus,
    StepType,
    display_id,
    full_step_id,
)

ERROR = "error"
INFO = "info"

FINISHED = frozenset({Status.SUCCESS.value, Status.FAILED.value})
# A lease expiring further ahead than this was not written by a sane renewer (ttl ~30 s).
MAX_LEASE_AHEAD_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    message: str
    session_id: str | None = None
    step: str | None = None  # display id (s0005)
    severity: str = ERROR
    repair: Repair | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "session": self.session_id,
            "step": self.step,
            "repairable": self.repair is not None,
        }
        if self.repair is not None:
            out["repair"] = {k: v for k, v in asdict(self.repair).items() if v is not None}
        return out


@dataclass
class Report:
    database: str
    sessions: int = 0
    steps: int = 0
    snapshots: int = 0
    blobs: int = 0
    findings: list[Finding] = field(default_factory=list)
    backup: str | None = None
    repaired: list[Finding] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)  # sessions a live worker drives

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "ok": self.ok,
            "checked": {
                "sessions": self.sessions,
                "steps": self.steps,
                "snapshots": self.snapshots,
                "blobs": self.blobs,
            },
            "findings": [f.to_json() for f in self.findings],
            "backup": self.backup,
            "repaired": [f.to_json() for f in self.repaired],
            "skippedLive": self.skipped_live,
        }


def check(store: Store, *, access: FsckAccess | None = None) -> Report:
    """Every check, over every session, on one consistent view; nothing is written."""
    access = access or fsck_access(store)
    now = access.now()
    # Below the rows first: damage there (a WAL SQLite ignores, a corrupt page) is never
    # answered with an `ok` from the rows SQLite still shows.
    storage = [Finding(code, message) for code, message in access.storage()]
    report = access.read(lambda reader: _check_all(reader, store.url, now))
    report.findings[:0] = storage
    return report


def _check_all(reader: FsckReader, url: str, now: int) -> Report:
    report = Report(database=url)
    add = report.findings.append
    sessions = reader.sessions()
    report.sessions = len(sessions)
    known = {s.session_id for s in sessions}
    for step_id, sid in reader.stray_steps():
        add(Finding("step_without_session", f"step {step_id} belongs to no session", sid))
    for sid, seq in reader.stray_snapshots():
        add(
            Finding(
                "snapshot_without_session",
                "snapshot of a session that does not exist",
                sid,
                display_id(seq),
            )
        )
    blob_hashes = reader.blob_hashes()
    report.blobs = len(blob_hashes)
    referenced: set[str] = set()
    for row in sessions:
        steps = reader.steps(row.session_id)
        report.steps += len(steps)
        images = _image_hashes(steps)  # view_file's images (docs/storage.md)
        referenced |= images
        if images - blob_hashes:
            first = next(st for st in steps if _image_hashes([st]) - blob_hashes)
            add(
                Finding(
                    "image_blob_missing",
                    f"{len(images - blob_hashes)} image(s) a tool step returned are not "
                    f"stored (the first returned by {first.name} here)",
                    row.session_id,
                    display_id(first.seq),
                )
            )
        for f in _check_session(row, steps, now):
            add(f)
        snaps = reader.snapshot_rows(row.session_id)
        report.snapshots += len(snaps)
        for f in _check_snapshots(row, snaps, blob_hashes, referenced):
            add(f)
        if row.parent_session_id is not None and row.parent_session_id not in known:
            add(
                Finding(
                    "fork_parent_missing",
                    f"forked from {row.parent_session_id}, which does not exist",
                    row.session_id,
                )
            )
    for restore in reader.restores():
        manifest = restore.manifest or {}
        missing = hashes_of(manifest) - blob_hashes
        referenced |= hashes_of(manifest)
        if missing:
            add(
                Finding(
                    "restore_blob_missing",
                    f"a pending {restore.kind} restore needs {len(missing)} file content(s) "
                    "the database does not hold",
                    restore.session_id,
                )
            )
        else:
            add(
                Finding(
                    "restore_pending",
                    f"a {restore.kind} restore is journaled but not finished on disk "
                    "(the runtime completes it when the session is next opened)",
                    restore.session_id,
                    severity=INFO,
                )
            )
    for f in _check_blobs(reader, referenced):
        add(f)
    return report


def repair(
    store: Store,
    report: Report,
    *,
    stamp: str | None = None,
    access: FsckAccess | None = None,
) -> Report:
    """Back the database up, then apply every repairable finding's fix in one transaction.
    Sessions with a live lease are left alone (listed in skipped_live)."""
    access = access or fsck_access(store)
    now = access.now()
    live = {
        s.session_id
        for s in access.read(lambda reader: reader.sessions())
        if s.lease_owner is not None
        and s.lease_expires_at is not None
        and now < s.lease_expires_at <= now + MAX_LEASE_AHEAD_MS
    }
    todo = [f for f in report.findings if f.repair is not None]
    chosen = [f for f in todo if f.session_id not in live or f.repair.kind == "sweep_blobs"]  # type: ignore[union-attr]
    report.skipped_live = sorted({f.session_id for f in todo if f not in chosen and f.session_id})
    if not chosen:
        return report
    report.backup = access.backup(stamp or time.strftime("%Y%m%dT%H%M%S", time.gmtime()))
    access.repair([f.repair for f in chosen if f.repair is not None])
    report.repaired = chosen
    return report


# --- the checks -------------------------------------------------------------------------------


def _check_session(row: SessionRow, steps: list[Step], now: int) -> Iterable[Finding]:
    sid = row.session_id
    max_seq = 0
    seqs = {s.seq for s in steps}
    # A rollback's pending plan runs until the rollback is finished or abandoned: no step
    # left running by a dead process (xclaw/runtime/rollbacks.py).
    running = [
        s
        for s in steps
        if s.status is StepStatus.RUNNING
        and not (s.step_type is StepType.SYSTEM_ALERT and s.name == ROLLBACK_PLAN)
    ]
    for s in steps:
        max_seq = max(max_seq, s.seq)
        if s.step_id != full_step_id(sid, s.seq):
            yield Finding(
                "step_id_mismatch",
                f"step id {s.step_id} does not match its sequence number {s.seq}",
                sid,
                s.display_id,
            )
        if s.parent_step_id is not None:
            owner, _, tail = s.parent_step_id.rpartition(":")
            parent_seq = _seq_of(tail)
            if owner == sid and parent_seq is not None and parent_seq not in seqs:
                yield Finding(
                    "parent_missing",
                    f"parent link {tail} names no step of the session (the trace tree "
                    "loses this step's cause)",
                    sid,
                    s.display_id,
                    repair=Repair("detach_parent", session_id=sid, step_id=s.step_id),
                )
            elif owner != sid or parent_seq is None:
                yield Finding(
                    "parent_outside_session",
                    f"parent link {s.parent_step_id} leaves the session",
                    sid,
                    s.display_id,
                    repair=Repair("detach_parent", session_id=sid, step_id=s.step_id),
                )
            elif parent_seq >= s.seq:
                yield Finding(
                    "parent_after_child",
                    f"parent {tail} is not earlier than the step",
                    sid,
                    s.display_id,
                )
        if s.status is StepStatus.RUNNING and s.end_time is not None:
            yield Finding("running_step_ended", "a running step has an end time", sid, s.display_id)
        if s.status is not StepStatus.RUNNING and s.end_time is None:
            yield Finding(
                "finished_step_without_end",
                f"a {s.status.value} step has no end time",
                sid,
                s.display_id,
            )
        if s.end_time is not None and s.end_time < s.start_time:
            yield Finding("step_ends_before_start", "end time before start time", sid, s.display_id)
    if max_seq >= row.next_seq:
        yield Finding(
            "seq_reused",
            f"next_seq is {row.next_seq} but step {display_id(max_seq)} exists: "
            "the next step would reuse an id",
            sid,
            repair=Repair("raise_next_seq", session_id=sid, value=max_seq + 1),
        )

    # Statuses agree with the steps.
    approvals = [
        s for s in running if s.step_type is StepType.SYSTEM_ALERT and s.name == APPROVAL_STEP_NAME
    ]
    if row.status in FINISHED:
        for s in running:
            yield Finding(
                "running_step_in_finished_session",
                f"{s.step_type.value} {s.name} is running in a {row.status} session",
                sid,
                s.display_id,
                repair=Repair("interrupt_step", session_id=sid, seq=s.seq),
            )
    elif row.status == Status.PAUSED.value and not approvals:
        yield Finding(
            "paused_without_approval",
            "the session is Paused but no approval is pending",
            sid,
            repair=Repair(
                "set_status",
                session_id=sid,
                status=Status.RUNNING.value,
                expected=Status.PAUSED.value,
            ),
        )
    elif row.status == Status.RUNNING.value and approvals:
        yield Finding(
            "approval_while_running",
            "an approval is pending but the session is not Paused",
            sid,
            approvals[0].display_id,
            repair=Repair(
                "set_status",
                session_id=sid,
                status=Status.PAUSED.value,
                expected=Status.RUNNING.value,
            ),
        )
    if row.status == Status.SUCCESS.value:
        last_llm = next(
            (
                s
                for s in reversed(steps)
                if s.step_type is StepType.LLM_CALL and s.agent == MAIN_AGENT
            ),
            None,
        )
        if last_llm is not None and (
            last_llm.status is not StepStatus.COMPLETED or _calls_of(last_llm)
        ):
            yield Finding(
                "success_without_answer",
                "the session is Success but its last model call is not a final answer",
                sid,
                last_llm.display_id,
            )
    yield from _check_tool_calls(sid, steps)
    yield from _check_lease(row, now)


def _check_tool_calls(sid: str, steps: list[Step]) -> Iterable[Finding]:
    """Each tool call a model asked for has exactly one tool step (retries after an
    interruption aside) — unless the run stopped right after that model call (cancel, crash,
    failure, rollback, fork: no later model call of that agent in the turn), where the
    conversation records the call as not run or resume runs it."""
    by_agent: dict[str, list[Step]] = defaultdict(list)
    for s in steps:
        if s.step_type is not StepType.USER_INPUT:
            by_agent[s.agent].append(s)
    # The main agent's user messages start turns (a sub-agent's task is recorded as its own
    # user message, inside the turn).
    user_seqs = [
        s.seq for s in steps if s.step_type is StepType.USER_INPUT and s.agent == MAIN_AGENT
    ]
    for agent, own in by_agent.items():
        llm_seqs = [s.seq for s in own if s.step_type is StepType.LLM_CALL]
        requested_ever: set[str] = set()
        for s in own:
            if s.step_type is StepType.LLM_CALL and s.status is StepStatus.COMPLETED:
                calls = _calls_of(s)
                requested_ever |= {c for c, _ in calls}
                if not calls:
                    continue
                next_llm = next((q for q in llm_seqs if q > s.seq), None)
                next_user = next((q for q in user_seqs if q > s.seq), None)
                if next_llm is None or (next_user is not None and next_user < next_llm):
                    continue  # the run stopped after this call: settled as not run / resumed
                # A tool step answers this call: same call id, and hung under this model call
                # (the recorder's parent link) or recorded before the next one.
                answers = [
                    t
                    for t in own
                    if t.step_type is StepType.TOOL_CALL
                    and t.seq > s.seq
                    and (t.parent_step_id == s.step_id or t.seq < next_llm)
                ]
                for call_id, name in calls:
                    mine = [t for t in answers if t.call_id == call_id]
                    done = [
                        t
                        for t in mine
                        if not (t.status is StepStatus.FAILED and t.error_message == INTERRUPTED)
                    ]
                    if not mine:
                        yield Finding(
                            "tool_step_missing",
                            f"the model asked for {name} (call {call_id}) and the "
                            "conversation went on, but no tool step records it",
                            sid,
                            s.display_id,
                        )
                    elif len(done) > 1:
                        yield Finding(
                            "tool_step_duplicate",
                            f"call {call_id} ({name}) has {len(done)} tool steps "
                            "that ran to an end: " + ", ".join(t.display_id for t in done),
                            sid,
                            done[1].display_id,
                        )
            elif (
                s.step_type is StepType.TOOL_CALL
                and s.call_id is not None
                and s.call_id not in requested_ever
            ):
                yield Finding(
                    "tool_step_unrequested",
                    f"tool step {s.name} answers call {s.call_id}, which no earlier "
                    f"model call of agent {agent} asked for",
                    sid,
                    s.display_id,
                )


def _check_lease(row: SessionRow, now: int) -> Iterable[Finding]:
    sid = row.session_id
    if row.lease_owner is None and row.lease_expires_at is not None:
        yield Finding(
            "lease_expiry_without_owner",
            "a lease expiry is set but nobody owns it",
            sid,
            repair=Repair("clear_lease_expiry", session_id=sid),
        )
    if row.lease_owner is not None and row.lease_expires_at is None:
        yield Finding(
            "lease_without_expiry",
            f"lease held by {row.lease_owner} never expires",
            sid,
            repair=Repair("expire_lease", session_id=sid),
        )
    if row.lease_owner is not None and row.lease_token < 1:
        yield Finding(
            "lease_without_token", f"lease held by {row.lease_owner} has no fencing token", sid
        )
    if row.lease_expires_at is not None and row.lease_expires_at > now + MAX_LEASE_AHEAD_MS:
        yield Finding(
            "lease_expiry_far",
            "the lease expires more than a day from now: a dead worker would block "
            "the session that long",
            sid,
            repair=Repair("expire_lease", session_id=sid),
        )


def _check_snapshots(
    row: SessionRow, snaps: list[SnapshotRow], blob_hashes: set[str], referenced: set[str]
) -> Iterable[Finding]:
    sid = row.session_id
    states: dict[int, Manifest] = {}
    for snap in snaps:
        at = display_id(snap.seq)
        # At next_seq itself: the state before the next step, recorded after a side effect
        # when the workspace follows the session (docs/workspace.md); beyond it, never.
        if snap.seq > row.next_seq:
            yield Finding(
                "snapshot_beyond_next_seq",
                f"a snapshot before step {at}, which was never allocated",
                sid,
                at,
            )
        try:
            entries = {p: check_entry(p, e) for p, e in dict(snap.manifest).items()}
            removed = list(snap.removed or ())
        except (TypeError, ValueError) as e:
            yield Finding("snapshot_manifest_invalid", f"snapshot manifest: {e}", sid, at)
            continue
        if snap.base_seq is None:
            state = entries
        elif snap.base_seq in states:
            state = apply_delta(states[snap.base_seq], entries, removed)
        else:
            yield Finding(
                "snapshot_chain_broken",
                f"delta against snapshot {display_id(snap.base_seq)}, which is "
                "missing or unreadable",
                sid,
                at,
            )
            continue
        states[snap.seq] = state
        used = hashes_of(entries)
        referenced |= used
        missing = used - blob_hashes
        if missing:
            yield Finding(
                "blob_missing",
                f"{len(missing)} file content(s) of this snapshot are not stored "
                f"(e.g. {min(missing)[:12]}…)",
                sid,
                at,
            )


def _image_hashes(steps: list[Step]) -> set[str]:
    """Blobs a tool step names as the images it returned."""
    found: set[str] = set()
    for st in steps:
        out = st.output_data
        if st.step_type is StepType.TOOL_CALL and isinstance(out, dict):
            for ref in out.get("images") or ():
                if isinstance(ref, dict) and isinstance(ref.get("hash"), str):
                    found.add(ref["hash"])
    return found


def _check_blobs(reader: FsckReader, referenced: set[str]) -> Iterable[Finding]:
    unreferenced = 0
    for blob in reader.blobs():
        try:
            data = decode_blob(blob.encoding, blob.data)
        except Exception as e:  # noqa: BLE001 - a corrupt payload is a finding, not a crash
            yield Finding("blob_corrupt", f"blob {blob.hash[:12]}… cannot be decoded: {e}")
            continue
        if content_hash(data) != blob.hash or len(data) != blob.size:
            yield Finding(
                "blob_corrupt",
                f"blob {blob.hash[:12]}… holds content that does not match its hash or size",
            )
        if blob.hash not in referenced:
            unreferenced += 1
    if unreferenced:
        yield Finding(
            "blob_unreferenced",
            f"{unreferenced} blob(s) no snapshot refers to (left by an interrupted "
            "snapshot; swept by the next rollback or delete)",
            severity=INFO,
            repair=Repair("sweep_blobs"),
        )


def _calls_of(step: Step) -> list[tuple[str, str]]:
    out = step.output_data if isinstance(step.output_data, dict) else {}
    calls = []
    for c in out.get("tool_calls") or ():
        if isinstance(c, dict) and c.get("id"):
            calls.append((str(c["id"]), str(c.get("name") or "?")))
    return calls


def _seq_of(tail: str) -> int | None:
    if tail[:1] in ("s", "S") and tail[1:].isdigit():
        return int(tail[1:])
    return None
