"""Operator commands: `xclaw fsck` (check, and repair, a database) and `xclaw replay`
(re-run a recorded session). The logic lives in xclaw/ops; these only parse and print."""

from __future__ import annotations

import sys

import click

from xclaw.cli.commands_store import _dump, _out, with_store, workspace_option
from xclaw.store.base import Store


@click.command("fsck", short_help="Check every invariant of a database (and repair).")
@click.option("--repair", is_flag=True, help="Fix what is safe, in one transaction, after a backup.")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@with_store
def fsck_cmd(store: Store, repair: bool, as_json: bool) -> None:
    """Check a database: tool calls and their tool steps, parent links, statuses against the
    steps, running steps in finished sessions, step ids and next_seq, snapshots and blobs,
    leases. Exits 1 when an error is found (after --repair: one that remains), 0 otherwise.

    \b
    --repair first copies the whole database (SQLite: FILE.fsck-STAMP.bak beside it;
    PostgreSQL: a schema SCHEMA_fsck_STAMP), then applies every safe fix in one
    transaction: running steps of finished sessions marked interrupted, Paused/Running made
    to agree with pending approvals, next_seq raised past the last step, parent links that
    leave their session cut, broken lease fields expired, unreferenced blobs swept. Sessions
    a live worker drives are left alone. What cannot be fixed safely is only reported.
    """
    from xclaw.ops import fsck

    report = fsck.check(store)
    before = report
    if repair:
        fsck.repair(store, report)
        after = fsck.check(store)
        after.backup, after.repaired, after.skipped_live = (
            report.backup, report.repaired, report.skipped_live,
        )
        report = after
    if as_json:
        data = report.to_json()
        if repair:
            data["before"] = [f.to_json() for f in before.findings]
        click.echo(_dump(data))
    else:
        _print_report(report, repaired=repair)
    sys.exit(0 if report.ok else 1)


def _print_report(report: object, *, repaired: bool) -> None:
    from xclaw.ops.fsck import Report

    assert isinstance(report, Report)
    out = _out()
    out.print(
        f"fsck {report.database}: {report.sessions} session(s), {report.steps} step(s), "
        f"{report.snapshots} snapshot(s), {report.blobs} blob(s)"
    )
    if repaired:
        if report.backup:
            out.print(f"backup: {report.backup}")
        for f in report.repaired:
            where = " ".join(x for x in (f.session_id, f.step) if x)
            out.print(f"repaired  {f.code}  {where}".rstrip())
        for sid in report.skipped_live:
            out.print(f"skipped   session {sid}: a live worker drives it (try again later)")
    for f in report.findings:
        where = " ".join(x for x in (f.session_id, f.step) if x) or "database"
        fix = "  [--repair fixes this]" if f.repair is not None and not repaired else ""
        out.print(f"{f.severity:<5}  {f.code}  {where}: {f.message}{fix}")
    errors = len(report.errors)
    notes = len(report.findings) - errors
    if errors:
        out.print(f"{errors} error(s), {notes} note(s): the database breaks its invariants")
    else:
        out.print(f"ok ({notes} note(s))" if notes else "ok")


def register(cli: click.Group) -> None:
    cli.add_command(fsck_cmd)


__all__ = ["fsck_cmd", "register", "workspace_option"]
