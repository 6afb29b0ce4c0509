"""[cli] Offline workspace commands: `xclaw snapshots` (a session's workspace snapshots) and
`xclaw diff` (what changed in the workspace between the states before two steps).

Snapshots keep the workspace's files as they were, names and contents (a rollback must give
them back exactly); what `xclaw diff` shows of them is redacted (docs/security.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from xclaw.cli.commands_store import with_store, workspace_option
from xclaw.cli.redaction import output_redactor
from xclaw.errors import WorkspaceError
from xclaw.recorder.redact import Redactor
from xclaw.store import Access
from xclaw.store.base import Store
from xclaw.store.snapshots.model import Entry, SnapshotInfo
from xclaw.terminal.text import SafeConsole, json_for_terminal, printable
from xclaw.workspace.diff import State, change_json, compare, describe, unified

_NOW = ("now", "current")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _snapshot_json(s: SnapshotInfo) -> dict[str, Any]:
    return {
        "step": s.display_id,
        "seq": s.seq,
        "files": s.files,
        "bytes": s.bytes,
        "newBytes": s.new_bytes,
        "skipped": s.skipped,
        "whole": s.full,
        "createdAt": s.created_at,
    }


def out_console() -> Console:
    # Plain text: paths, ids and diffs must not be restyled or wrapped.
    # Diffs show files a tool wrote: printed inert (xclaw.terminal.text).
    return SafeConsole(highlight=False, soft_wrap=True, markup=False)


def workspace_root(given: str | None) -> Path:
    if given:
        return Path(given).expanduser()
    from xclaw.config.settings import load_settings

    return load_settings().workspace_root


@click.command("snapshots", short_help="The workspace snapshots of a session.")
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of snapshots.")
@with_store(Access.READ)
def snapshots_cmd(store: Store, session_id: str, as_json: bool) -> None:
    """The workspace snapshots of SESSION: one before each step that could change files
    (shell, write_file, edit_file). NEW is what the snapshot added to the database; files
    unchanged since an earlier snapshot, of any session, cost nothing."""
    found = store.snapshots.list_snapshots(session_id)
    if as_json:
        click.echo(json.dumps([_snapshot_json(s) for s in found]))
        return
    out = out_console()
    if not found:
        out.print(f"no workspace snapshots in session {session_id}")
        return
    out.print(f"{'BEFORE':<8}{'FILES':>7}{'BYTES':>11}{'NEW':>11}{'SKIPPED':>9}  STORED")
    for s in found:
        out.print(
            f"{s.display_id:<8}{s.files:>7}{_size(s.bytes):>11}{_size(s.new_bytes):>11}"
            f"{s.skipped:>9}  {'whole' if s.full else 'delta'}"
        )
    out.print(f"diff two of them: xclaw diff {session_id} {found[0].display_id} now")


def _state(store: Store, session_id: str, ref: str, root: Path) -> State:
    """The workspace just before step `ref` (the first snapshot at or after it), or now."""
    if ref.lower() in _NOW:
        return _current(store, session_id, root, "now")
    step = store.record.get_step(session_id, ref)  # StepNotFound for an unknown step
    found = store.snapshots.snapshot_from(session_id, step.seq)
    label = f"before {step.display_id}"
    if found is None:
        # No side effect since that step: the files are as they are now.
        return _current(store, session_id, root, label)

    def read(path: str, entry: Entry) -> bytes:
        return store.snapshots.get_blobs([entry["hash"]])[entry["hash"]]

    return State(label, found[1], read)


def _current(store: Store, session_id: str, root: Path, label: str) -> State:
    from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter
    from xclaw.workspace.timetravel import Workspaces

    workspaces = Workspaces(store, root)
    if store.snapshots.pending_restores(session_id):
        # Completing it would write (files and the record); `diff` only reads.
        raise WorkspaceError(
            f"the workspace of session {session_id} is being restored (a rollback or fork was "
            "cut short) and is not what its record says yet; it is completed when the session "
            f"is next opened (xclaw run --session {session_id}, or xclaw chat). Compare steps "
            "instead of `now` meanwhile."
        )
    ws = workspaces.path(session_id)
    if not ws.is_dir():
        raise WorkspaceError(f"session {session_id} has no workspace at {ws}; pass --workspace")
    snapshotter = Snapshotter(SnapshotConfig())
    manifest = snapshotter.capture(ws)

    def read(path: str, entry: Entry) -> bytes:
        from xclaw.sandbox.paths import resolve_in_workspace

        return resolve_in_workspace(ws, path).read_bytes()

    return State(label, manifest, read)


def _shown(state: State, r: Redactor) -> State:
    """The state with its text files read redacted: a secret spanning lines (a private key)
    is masked whole before the diff cuts the file into lines."""

    def read(path: str, entry: Entry) -> bytes:
        data = state.read(path, entry)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # binary: never shown, only "differs"
        return r.text(text).encode("utf-8")

    return State(state.label, state.manifest, read)


@click.command("diff", short_help="What changed between two steps, or between two sessions.")
@click.argument("session_id", metavar="SESSION")
@click.argument("step_a", metavar="STEP_A|SESSION_B")
@click.argument("step_b", metavar="[STEP_B]", required=False, default=None)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of changes.")
@click.option("--stat", "stat_only", is_flag=True, help="Only the list of changed files.")
@workspace_option
@with_store(Access.READ)
def diff_cmd(
    store: Store,
    session_id: str,
    step_a: str,
    step_b: str,
    as_json: bool,
    stat_only: bool,
    workspace: str | None,
) -> None:
    """Files added (A), removed (D), changed (M), of another type (T) or mode (P) between the
    workspace just before STEP_A and just before STEP_B, with a unified diff for text.
    A step is s0005, 5 or the full id; `now` is the workspace as it is.

    With two sessions (`xclaw diff SESSION SESSION_B`, e.g. a session and its fork): their
    steps after the fork aligned by content (same / changed / only on one side), a diff of
    their final answers, then the difference between their workspaces as they are now.

    Credentials (docs/security.md) show as [REDACTED], in file names and contents alike; the
    snapshots themselves keep the files as they were."""
    store.record.get_session(session_id)
    root = workspace_root(workspace)
    if step_b is None:
        other = store.record.resolve_session(step_a).session_id  # a unique prefix will do
        if not as_json:
            _branches(store, session_id, other)
        old = _state(store, session_id, "now", root)
        new = _state(store, other, "now", root)
        old = State(f"{session_id} now", old.manifest, old.read)
        new = State(f"{other} now", new.manifest, new.read)
    else:
        old = _state(store, session_id, step_a, root)
        new = _state(store, session_id, step_b, root)
    r = output_redactor()
    old, new = _shown(old, r), _shown(new, r)
    changes = compare(old.manifest, new.manifest)
    if as_json:
        click.echo(
            json_for_terminal(
                r([change_json(c, None if stat_only else unified(c, old, new)) for c in changes])
            )
        )
        return
    out = out_console()
    if not changes:
        out.print(f"no changes in the workspace between {old.label} and {new.label}")
        return
    out.print(f"workspace of {session_id}: {old.label} -> {new.label}, {len(changes)} change(s)")
    letters = {"added": "A", "removed": "D", "changed": "M", "type": "T", "mode": "P"}
    for c in changes:
        detail = describe(c.new if c.new is not None else c.old)
        if c.kind in ("mode", "type"):
            detail = f"{describe(c.old)} -> {describe(c.new)}"
        out.print(r.text(f"{letters[c.kind]}  {c.path}  ({detail})"))
    if stat_only:
        return
    for c in changes:
        text = unified(c, old, new)
        if text:
            text = r.text(text)  # the file names in its header
            click.echo("")
            # As is into a pipe (`patch` reads it); inert on a terminal, where a file a tool
            # wrote could otherwise drive it (xclaw.terminal.text).
            click.echo(text if not sys.stdout.isatty() else printable(text), nl=False)
        elif c.kind == "changed" and "hash" in (c.new or {}):
            click.echo(r.text(f"\nbinary or large file {c.path} differs"))


def _branches(store: Store, left: str, right: str) -> None:
    """The two sessions' steps after their common history, aligned by content."""
    from xclaw.views.branch_diff import align, answer_diff, final_answer, format_rows

    a, b = store.record.get_session(left), store.record.get_session(right)
    fork = 0
    if b.parent_session_id == left and b.forked_from_seq:
        fork = b.forked_from_seq
    elif a.parent_session_id == right and a.forked_from_seq:
        fork = a.forked_from_seq
    r = output_redactor()
    xs = [r.step(s) for s in store.record.steps(left) if s.seq > fork]
    ys = [r.step(s) for s in store.record.steps(right) if s.seq > fork]
    out = out_console()
    where = f"after the fork at s{fork:04d}" if fork else "(no common history)"
    out.print(f"branches {left} (left) and {right} (right), {where}")
    out.print(format_rows(align(xs, ys)))
    diff = answer_diff(final_answer(xs), final_answer(ys), (f"{left} answer", f"{right} answer"))
    if diff:
        out.print("")
        click.echo(printable(diff))  # model text: inert on a terminal and in a pipe
    out.print("")


def register(cli: click.Group) -> None:
    for command in (snapshots_cmd, diff_cmd):
        cli.add_command(command)
