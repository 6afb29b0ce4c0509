"""[cli] `xclaw run`: the headless entry point — the same runtime as the server, no server."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from xclaw.cli.commands_store import running_now
from xclaw.config.settings import load_settings
from xclaw.errors import EXIT_USAGE, AmbiguousSession, SessionNotFound, XclawError
from xclaw.store.steps.model import SessionState, session_state
from xclaw.wire.shapes import Frame

if TYPE_CHECKING:
    from xclaw.runtime.runtime import Runtime


class TerminalFrames:
    """Shows runtime frames exactly as `xclaw chat` does and answers approvals on the terminal
    (or denies them when nobody is there to ask)."""

    def __init__(self, runtime: Runtime, session_id: str, *, interactive: bool) -> None:
        from xclaw.terminal.render import Renderer, make_console

        self.runtime = runtime
        self.session_id = session_id
        self.interactive = interactive
        self.render = Renderer(make_console())
        self.failed = False
        self.denied_unasked = 0  # approvals denied because nobody could be asked

    def __call__(self, frame: Frame) -> None:
        if frame.get("type") == "approval_request":
            self.render.approval(frame)
            asyncio.get_running_loop().create_task(self._approve(frame))
            return
        if frame.get("type") == "error":
            self.failed = True
        self.render.frame(frame)

    async def _approve(self, frame: Frame) -> None:
        from xclaw.people.answered_by import NO_TERMINAL, AnsweredBy

        if self.interactive:
            answer = await asyncio.to_thread(_ask_yes_no, "Approve? [y/N] ")
            by = AnsweredBy.person("run", "terminal")
        else:
            # Nobody was asked: the record says so, not "denied by the user".
            answer, by = False, AnsweredBy(NO_TERMINAL)
            self.denied_unasked += 1
            hint = _allow_hint(self.runtime, str(frame.get("name") or ""))
            self.render.line(f"  no terminal to ask: denied ({hint})", "yellow")
        # Answered elsewhere, or the run ended meanwhile: nothing to answer any more.
        with contextlib.suppress(XclawError):
            self.runtime.answer_approval(self.session_id, frame["stepId"], answer, by)


def _allow_hint(runtime: Runtime, name: str) -> str:
    """What would let this call run without a terminal, given the approval mode in force:
    auto-edits only spares file edits; an MCP or Python tool (which has traits) can be
    allowed by name, and a destructive one is asked even under yolo."""
    mode = runtime.settings.approval.mode
    tool = runtime.toolbox.tools.get(name)
    traits = tool.traits if tool is not None else None
    if traits is None:  # built-in
        if name in ("write_file", "edit_file") and mode == "ask":
            return "use --approval auto-edits or yolo"
        return "use --approval yolo"
    policy = f"tool_policies: {{{name}: {{approval: allow}}}}"
    if mode == "yolo" or traits.destructive:
        return f"it is asked even under yolo; allow it in xclaw.yaml: {policy}"
    return f"use --approval yolo, or allow it in xclaw.yaml: {policy}"


def _nothing_to_resume(sid: str, state: SessionState) -> str:
    """Why `xclaw run --session ID` without a message did nothing, and what would; the
    session in the words of every listing (session_state)."""
    if state.key == "running":
        return (
            f"session {sid} ({state.text}): another process is driving it right now (xclaw "
            "workers shows which); nothing to resume here"
        )
    return (
        f"session {sid} ({state.text}): nothing to resume; continue the conversation with: "
        f'xclaw run --session {sid} "your next message"'
    )


def _ask_yes_no(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


async def _run(
    db: str | None,
    session: str | None,
    cont: bool,
    text: str,
    approval: str | None,
    workspace: str | None,
    agent: str | None = None,
) -> int:
    from xclaw.cli.startup import importing

    with importing():
        from xclaw.cli.redaction import redact_logs
        from xclaw.runtime.runtime import Runtime
        from xclaw.store import Access, open_store

    try:
        settings = load_settings(
            database=db, approval=approval, workspace_root=Path(workspace) if workspace else None
        )
        store = open_store(
            settings.database,
            access=Access.CREATE,
            blob_store=settings.blob_store,
            blob_grace_s=settings.blob_grace_s,
        )
    except XclawError as e:  # a bad XCLAW_MODEL, .env or database: one line, no traceback
        click.secho(f"error: {e.message}", fg="red", err=True)
        return e.exit_code
    runtime = Runtime(store, settings)
    redact_logs(runtime.redact)
    # --approval chose this run's mode: it applies even to a session recorded with another.
    runtime.explicit_approval = approval is not None
    try:
        if cont and not session:
            recent = store.record.list_sessions(limit=1)
            if not recent:
                raise click.UsageError("--continue: there is no session yet in " + store.url)
            session = recent[0].session_id
        found = None
        if session:
            try:
                found = store.record.resolve_session(session)  # a unique prefix is enough
            except SessionNotFound as e:
                if not text or isinstance(e, AmbiguousSession):
                    raise
        # An unknown id (or none) is created with its first message, once a model answers.
        sess, created = (found, False) if found is not None else await runtime.peek(session)
        sid = sess.session_id
        interactive = sys.stdin.isatty()
        printer = TerminalFrames(runtime, sid, interactive=interactive)
        runtime.subscribe(sid, printer)
        state = session_state(sess, busy=not created and running_now(store.leases)(sid))
        if agent is not None:
            runtime.agent_named(agent)  # an unknown one refused before anything is written
        if text:
            runtime.require_model()
            runs = f", agent {agent}" if agent else ""
            click.secho(f"session {sid} ({state.text}{runs})", fg="bright_black", err=True)
            await runtime.send(sid, text, create=True, agent=agent)
        elif not created and await runtime.resume_if_needed(sid, failed=True):
            if sess.status.value == "Failed":
                click.secho(
                    f"continuing Failed session {sid} from where it stopped",
                    fg="bright_black",
                    err=True,
                )
        elif printer.failed:  # it could not be resumed, and the error said why
            return 2
        else:
            now = store.record.get_session(sid)
            click.echo(
                _nothing_to_resume(sid, session_state(now, busy=running_now(store.leases)(sid)))
            )
            return 0
        await runtime.wait_idle(sid)
        # The first line named the session as it was; this one, as the run left it.
        ended = session_state(store.record.get_session(sid), busy=running_now(store.leases)(sid))
        click.secho(f"session {sid} ended: {ended.text}", fg="bright_black", err=True)
        if printer.denied_unasked:
            click.secho(
                f"error: {printer.denied_unasked} tool call(s) needed approval and were denied: "
                "stdin is not a terminal, so nobody could be asked. Run in a terminal, or see "
                "the hint beside each denied call (--approval, or tool_policies in xclaw.yaml).",
                fg="red",
                err=True,
            )
            return 3
        if printer.failed and store.record.get_session(sid).status.value == "Failed":
            click.secho(
                f"session {sid} is Failed; to continue it from where it stopped (a failed "
                f"LLM call is made again): xclaw run --session {sid}",
                fg="yellow",
                err=True,
            )
        return 1 if printer.failed else 0
    except XclawError as e:
        click.secho(f"error: {e.message}", fg="red", err=True)
        return e.exit_code
    except ValueError as e:  # a malformed --session id
        click.secho(f"error: {e}", fg="red", err=True)
        return EXIT_USAGE
    finally:
        await runtime.shutdown()
        store.close()


def register(cli: click.Group) -> None:
    @cli.command("run")
    @click.argument("text", required=False, default="")
    @click.option(
        "--session",
        "-r",
        "session",
        metavar="ID",
        help="Continue this session (a unique prefix of its id will do; an unknown id is created with the message).",
    )
    @click.option(
        "--continue", "-c", "cont", is_flag=True, help="Continue the most recently updated session."
    )
    @click.option(
        "--approval",
        type=click.Choice(["ask", "auto-edits", "yolo"]),
        default=None,
        help="ask: confirm edits and shell on the terminal (denied when there is no terminal); "
        "auto-edits: file edits run without asking; yolo: everything runs except the deny-list.",
    )
    @click.option(
        "--db",
        default=None,
        help="SQLite path or postgresql:// URL (default: $XCLAW_DB or $XCLAW_HOME/xclaw.db); "
        "created if there is none, another program's file is refused.",
    )
    @click.option(
        "--workspace", default=None, help="Workspace root (default: $XCLAW_HOME/workspaces)."
    )
    @click.option(
        "--agent",
        metavar="NAME",
        default=None,
        help="Run the message with this agent of xclaw.yaml's `agents:` (recorded: the "
        "session's turns after it run it too; docs/agents.md).",
    )
    def run_cmd(
        text: str,
        session: str | None,
        cont: bool,
        approval: str | None,
        db: str | None,
        workspace: str | None,
        agent: str | None,
    ) -> None:
        """Run a task headless, in this process, printing the conversation.

        \b
        xclaw run "list the files and count the lines"      new session
        xclaw run --continue "now sort them"                 most recent session
        xclaw run --session ID                               resume an interrupted or Failed session
        xclaw run --agent support "my order is late"         a declared agent (xclaw.yaml)
        """
        if text and text.startswith("/"):
            raise click.UsageError(
                "slash commands work in `xclaw chat`; offline use `xclaw steps/rollback/fork`"
            )
        try:
            if agent is not None and not text:
                raise click.UsageError("--agent runs a message: give TEXT too")
            code = asyncio.run(_run(db, session, cont, text, approval, workspace, agent))
        except XclawError as e:  # e.g. a bad xclaw.yaml, found before anything started
            click.secho(f"error: {e.message}", fg="red", err=True)
            code = e.exit_code
        sys.exit(code)
