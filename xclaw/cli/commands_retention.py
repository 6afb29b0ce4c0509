"""[cli] Retention and moving sessions: `xclaw gc` and `xclaw import` (`xclaw export` is in
commands_store). Offline, like the other store commands: they open the database directly."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from xclaw.cli.commands_store import _fail, _out, with_store, workspace_option, workspaces_for
from xclaw.cli.exit_status import EXIT_USAGE
from xclaw.cli.redaction import output_redactor
from xclaw.store import Access
from xclaw.store.base import Store
from xclaw.store.leases import new_worker_id
from xclaw.store.steps.model import Session
from xclaw.terminal.text import SafeConsole

if TYPE_CHECKING:
    from xclaw.store.transfer.format import Exported

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s`, `2w` (a bare number is days) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not an age like 30d, 12h, 90m, 45s or 2w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


@click.command(
    "gc", short_help="Delete sessions not updated for a while, with their snapshots and blobs."
)
@click.option(
    "--older-than",
    "older_than",
    default="30d",
    show_default=True,
    metavar="AGE",
    help="Sessions last updated longer ago than this go (30d, 12h, 90m, 2w).",
)
@click.option("--dry-run", is_flag=True, help="Only say what would go.")
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Do not ask for confirmation (for scripts; without it and without a terminal, gc "
    "refuses).",
)
@click.option("--json", "as_json", is_flag=True, help="The result as one JSON object.")
@workspace_option
@with_store(Access.WRITE)
def gc_cmd(
    store: Store,
    older_than: str,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    workspace: str | None,
) -> None:
    """Delete every session last updated longer ago than AGE — its steps, its workspace
    snapshots and files — then the stored file contents no snapshot needs any more.

    It first shows what it will delete (how many sessions, the oldest and newest of them)
    and asks; --yes skips the question, and without a terminal to ask on it refuses
    (exit 2) unless --yes is given. --dry-run only shows what would go.

    A session another process is driving right now (its lease is live) is kept and named.
    Snapshots of the sessions that stay are kept: rolling back to any of their steps still
    restores the files.

    With `sandbox.isolation: container`, the session containers of this workspace root that
    nobody runs are handled too: one whose session is gone is removed, one no worker has
    run for `sandbox.container_grace_s` is stopped (docs/containers.md).
    """
    try:
        age_s = parse_age(older_than)
    except click.BadParameter as e:
        _fail(f"--older-than: {e.message}", EXIT_USAGE)
    cutoff = int((time.time() - age_s) * 1000)
    doomed = [s for s in store.record.list_sessions() if s.updated_at < cutoff]
    old = [s.session_id for s in doomed]
    busy: list[str] = []
    if not dry_run and old and not yes:
        _confirm(store, doomed, older_than)
    if not dry_run:
        owner = f"gc:{new_worker_id()}"
        # Holding the lease keeps any worker from starting a session while it goes; one that
        # another process drives right now is kept.
        busy = [sid for sid in old if store.leases.acquire_lease(sid, owner, 300.0) is None]
        old = [sid for sid in old if sid not in busy]
    snaps, blobs, size = store.record.retention_preview(old)
    workspaces = workspaces_for(store, workspace)
    if not dry_run:
        for sid in old:
            workspaces.delete(sid)
        store.snapshots.gc_blobs()  # contents left unreferenced before (e.g. by an interrupted sweep)
    # Session containers nobody runs, whatever their age (docs/containers.md, "Reaping").
    reaped = workspaces.reap_containers(dry_run=dry_run)
    report = {
        "dryRun": dry_run,
        "olderThan": older_than,
        "sessions": old,
        "busy": busy,
        "snapshots": snaps,
        "blobs": blobs,
        "blobBytes": size,
        "containers": [
            {"sessionId": r.session_id, "action": r.action, "why": r.why} for r in reaped
        ],
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    out = _out()
    verb = "would delete" if dry_run else "deleted"
    n = len(old)
    out.print(
        f"[gc] {verb} {n} session(s) not updated for {older_than}, {snaps} snapshot(s), "
        f"{report['blobs']} stored file content(s) ({_human_bytes(size)})"
    )
    for sid in old:
        out.print(f"  {sid}")
    for sid in busy:
        out.print(f"[gc] kept {sid}: another process is driving it right now")
    for r in reaped:
        verb = f"would be {r.action}" if dry_run else r.action
        out.print(f"[gc] the container of {r.session_id} {verb}: {r.why}")


def _read_export(args: dict[str, Any]) -> None:
    """The file read and every line checked before any database is opened: a bad file
    leaves the target as it was (not even created). Its sessions go on in args["file"]."""
    from xclaw.store.transfer.format import parse_export

    file = args["file"]
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as e:
        _fail(f"cannot read {file}: {e.strerror or e}", EXIT_USAGE)
    lines = data.split(b"\n")
    args["file"] = (file, parse_export([ln.removesuffix(b"\r") for ln in lines], where=file))


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def _confirm(store: Store, doomed: list[Session], older_than: str) -> None:
    """What gc is about to delete, then the question (as `xclaw rollback` asks); nobody
    to ask — stdin is not a terminal — is a refusal, never a yes."""
    snaps, blobs, size = store.record.retention_preview([s.session_id for s in doomed])
    oldest = min(doomed, key=lambda s: s.updated_at)
    newest = max(doomed, key=lambda s: s.updated_at)
    what = (
        f"{len(doomed)} session(s) not updated for {older_than} (oldest updated "
        f"{_when(oldest.updated_at)}: {oldest.session_id}; newest {_when(newest.updated_at)}: "
        f"{newest.session_id}), {snaps} snapshot(s), {blobs} stored file content(s) "
        f"({_human_bytes(size)}) and their workspace directories"
    )
    if not sys.stdin.isatty():
        _fail(
            f"gc would delete {what}; stdin is not a terminal to confirm on: pass --yes to "
            "delete them (or --dry-run to list them)",
            EXIT_USAGE,
        )
    # On stderr, with the question: stdout stays the result (--json).
    out = SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
    out.print(f"[gc] about to delete {what}:")
    for s in sorted(doomed, key=lambda s: s.updated_at)[:20]:
        out.print(f"  {s.session_id}  {_when(s.updated_at)}  {s.title}")
    if len(doomed) > 20:
        out.print(f"  … and {len(doomed) - 20} more (--dry-run lists them all)")
    click.confirm("Delete them?", abort=True, err=True)


@click.command("import", short_help="Load sessions written by `xclaw export`.")
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="The imported sessions as JSON.")
@with_store(Access.CREATE, before=_read_export)
def import_cmd(store: Store, file: tuple[str, list[Exported]], as_json: bool) -> None:
    """Load the sessions of FILE (what `xclaw export` or `xclaw export --all` wrote; - for
    stdin) into this database, SQLite or PostgreSQL alike. Session and step ids are kept; a
    session whose id is already taken here gets a new one (its steps follow). The files of a
    session's workspace are not part of an export. Credentials this machine knows of
    (docs/security.md) are redacted on the way in.

    Every line is checked first; a bad one is named (`FILE line N: what is wrong`, exit 2)
    and nothing is imported. The whole file is then imported in one transaction.
    """
    from xclaw.store.transfer.format import import_sessions

    exported = file[1]
    # Into the record, redacted as a run's steps are: a file from an older version (or one
    # a secret was added since) may hold a credential of this machine's.
    r = output_redactor()
    for ex in exported:
        ex.session = r.session(ex.session)
        ex.steps = [r.step(st) for st in ex.steps]
    done = import_sessions(store.record, exported)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "sessionId": d.session.session_id,
                        "from": d.old_id,
                        "steps": d.steps,
                        "remapped": d.remapped,
                    }
                    for d in done
                ]
            )
        )
        return
    out = _out()
    for d in done:
        how = f" (id {d.old_id} was taken here: new id)" if d.remapped else ""
        out.print(f"[import] session {d.session.session_id}: {d.steps} step(s){how}")


def register(cli: click.Group) -> None:
    for command in (gc_cmd, import_cmd):
        cli.add_command(command)
