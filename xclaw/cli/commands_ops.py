"""[cli] Operator commands: `xclaw fsck` (check, and repair, a database) and `xclaw replay`
(re-run a recorded session). The logic lives in xclaw/ops; these only parse and print —
redacted, as every command prints what it read from the record (xclaw/cli/redaction.py)."""

from __future__ import annotations

import sys

import click
from rich.console import Console

from xclaw.cli.commands_store import _dump, _out, with_store, workspace_option
from xclaw.cli.redaction import output_redactor, redact_logs
from xclaw.config.settings import Settings
from xclaw.llm.base import Model
from xclaw.store import Access
from xclaw.store.base import Store


@click.command("fsck", short_help="Check every invariant of a database (and repair).")
@click.option(
    "--repair", is_flag=True, help="Fix what is safe, in one transaction, after a backup."
)
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@with_store(lambda args: Access.WRITE if args["repair"] else Access.READ)
def fsck_cmd(store: Store, repair: bool, as_json: bool) -> None:
    """Check a database: tool calls and their tool steps, parent links, statuses against the
    steps, running steps in finished sessions, step ids and next_seq, snapshots and blobs,
    leases; on SQLite also its WAL file and SQLite's integrity check. Exits 1 when an error
    is found (after --repair: one that remains), 0 otherwise, 2 when there is no xclaw
    database to check (fsck never creates one, nor answers ok for another program's file).
    Without --repair it only reads: a database of an older xclaw is upgraded by --repair.

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
            report.backup,
            report.repaired,
            report.skipped_live,
        )
        report = after
    if as_json:
        data = report.to_json()
        if repair:
            data["before"] = [f.to_json() for f in before.findings]
        click.echo(_dump(output_redactor()(data)))
    else:
        _print_report(report, repaired=repair)
    sys.exit(0 if report.ok else 1)


def _print_report(report: object, *, repaired: bool) -> None:
    from xclaw.ops.fsck import Report

    assert isinstance(report, Report)
    out = _Redacted(_out())
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


@click.command("replay", short_help="Re-run a recorded session; report where tools differ.")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--from",
    "from_step",
    default=None,
    metavar="sNNNN",
    help="Start at this step of the main agent: the steps before it and their files "
    "are taken as they are (a fork), only the rest re-runs.",
)
@click.option(
    "--model",
    "model_spec",
    default=None,
    metavar="SPEC",
    help="Answer with this model, live (anthropic:…, openai:…, script:…), instead "
    "of the recorded outputs.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The new session id and the divergences as one JSON object.",
)
@workspace_option
@with_store(Access.WRITE)
def replay_cmd(
    store: Store,
    session_id: str,
    from_step: str | None,
    model_spec: str | None,
    as_json: bool,
    workspace: str | None,
) -> None:
    """Re-run SESSION into a new session: every model call is answered with the recorded
    output (no model or API key needed), every tool runs again in the new session's fresh
    workspace, approvals are answered as they were. Reports the first place where a tool
    result differs from the record (exit 1), or that the session was reproduced (exit 0).

    \b
    xclaw replay SESSION                          offline: does the session reproduce?
    xclaw replay SESSION --from s0007             only from s0007 on (earlier steps forked)
    xclaw replay SESSION --model openai:gpt-4o    a new model on the same task
    xclaw replay SESSION --from s0007 --model M   the session up to s0007, then model M
    """
    import asyncio
    from pathlib import Path

    from xclaw.config.settings import load_settings
    from xclaw.ops.replay import replay

    store.record.get_session(session_id)  # SessionNotFound: exit 2
    start = None
    if from_step is not None:
        step = store.record.get_step(session_id, from_step)  # StepNotFound: exit 2
        if step.agent != "main":
            raise click.UsageError(
                f"--from {step.display_id} is a step of sub-agent {step.agent}: start at a step "
                "of the main agent (e.g. the spawn_agent call that started it)"
            )
        start = step.seq
    settings = load_settings(
        database=store.url, workspace_root=Path(workspace).expanduser() if workspace else None
    )
    live = _live_model(model_spec, settings) if model_spec else None
    redact_logs(output_redactor())
    result = asyncio.run(replay(store, settings, session_id, live=live, start=start))
    if as_json:
        click.echo(_dump(output_redactor()(result.to_json())))
    else:
        out = _Redacted(_out())
        since = f" from {result.start}" if result.start else ""
        out.print(f"[replay] {session_id}{since} -> new session {result.session_id}")
        out.print(f"[replay] workspace: {result.workspace}")
        out.print(
            f"[replay] {result.model_calls} model call(s) answered from the record"
            + (f", {result.live_calls} by {live.name}" if live is not None else "")
        )
        if result.outside:
            undo = [e for e in result.outside if e["effect"] == "compensable"]
            out.print(
                f"[replay] the replay ran {len(result.outside)} call(s) with effects outside "
                "the workspace, for real: "
                + ", ".join(f"{e['stepId']} {e['tool']} ({e['effect']})" for e in result.outside)
                + (
                    f"; undo the {len(undo)} compensable one(s) with: xclaw rollback "
                    f"{result.session_id} {result.start or 's0001'}"
                    if undo
                    else ""
                )
            )
        first = result.first
        if first is None:
            out.print("[replay] reproduced: every tool result matches the record")
            if result.record_ended:
                out.print("[replay] the record stops mid-turn: replayed up to its last answer")
        else:
            where = first.step or first.new_step or "?"
            out.print(
                f"[replay] first divergence at {where} ({first.kind}"
                + (f", {first.tool}" if first.tool else "")
                + ")"
            )
            if first.recorded is not None:
                out.print(f"  recorded: {_with_output(first.recorded, first.recorded_output)}")
            if first.replayed is not None:
                out.print(f"  replayed: {_with_output(first.replayed, first.replayed_output)}")
            if len(result.divergences) > 1:
                out.print(
                    f"[replay] {len(result.divergences) - 1} more divergence(s) (--json lists them)"
                )
    sys.exit(0 if result.first is None else 1)


def _live_model(spec: str, settings: Settings) -> Model:
    """The model named on the command line, built as XCLAW_MODEL would build it."""
    from xclaw.config.settings import provider_chain
    from xclaw.llm.factory import build_model

    return build_model(settings.model_copy(update={"providers": provider_chain(spec)}))


class _Redacted:
    """A console whose lines are redacted before they are printed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.redact = output_redactor()

    def print(self, line: str) -> None:
        self.console.print(self.redact.text(line))


def register(cli: click.Group) -> None:
    cli.add_command(fsck_cmd)
    cli.add_command(replay_cmd)


def _with_output(status: str, output: str | None) -> str:
    """`failed: <its error>` for a tool_status divergence, on one line."""
    if not output:
        return status
    line = " ".join(output.split())
    return f"{status}: {line[:300]}" + (" …" if len(line) > 300 else "")
