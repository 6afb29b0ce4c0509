"""`xclaw run`: the headless entry point — the same runtime as the server, no server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from xclaw.config import load_settings
from xclaw.errors import XclawError


class TerminalFrames:
    """Shows runtime frames exactly as `xclaw chat` does and answers approvals on the terminal
    (or denies them when nobody is there to ask)."""

    def __init__(self, runtime: Any, session_id: str, *, interactive: bool) -> None:
        from xclaw.cli.chat_render import Renderer, make_console

        self.runtime = runtime
        self.session_id = session_id
        self.interactive = interactive
        self.render = Renderer(make_console())
        self.failed = False

    def __call__(self, frame: dict[str, Any]) -> None:
        if frame.get("type") == "approval_request":
            self.render.approval(frame)
            asyncio.get_running_loop().create_task(self._approve(frame))
            return
        if frame.get("type") == "error":
            self.failed = True
        self.render.frame(frame)

    async def _approve(self, frame: dict[str, Any]) -> None:
        if self.interactive:
            answer = await asyncio.to_thread(_ask_yes_no, "Approve? [y/N] ")
        else:
            answer = False
            self.render.line("  no terminal to ask: denied (use --approval auto-edits or yolo)", "yellow")
        try:
            self.runtime.answer_approval(self.session_id, frame["stepId"], answer)
        except XclawError:
            pass  # answered elsewhere, or the run ended meanwhile


def _nothing_to_resume(sid: str, status: str) -> str:
    """Why `xclaw run --session ID` without a message did nothing, and what would."""
    if status == "Running":
        return (
            f"session {sid} is Running and waiting for input (or driven by another process): "
            f'nothing to resume; send a message with: xclaw run --session {sid} "..."'
        )
    return (
        f"session {sid} is {status}: nothing to resume; continue the conversation with: "
        f'xclaw run --session {sid} "your next message"'
    )


def _ask_yes_no(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


async def _run(db: str | None, session: str | None, cont: bool, text: str, approval: str | None, workspace: str | None) -> int:
    from xclaw.runtime.runtime import Runtime
    from xclaw.store import open_store

    settings = load_settings(
        db=db, approval_mode=approval, workspace_root=Path(workspace) if workspace else None
    )
    store = open_store(settings.db)
    runtime = Runtime(store, settings)
    try:
        if cont and not session:
            recent = store.list_sessions(limit=1)
            if not recent:
                raise click.UsageError("--continue: there is no session yet in " + store.url)
            session = recent[0].session_id
        sess, created = await runtime.open(session)
        sid = sess.session_id
        interactive = sys.stdin.isatty()
        printer = TerminalFrames(runtime, sid, interactive=interactive)
        runtime.subscribe(sid, printer)
        click.secho(f"session {sid} ({'new' if created else sess.status.value})", fg="bright_black", err=True)
        if text:
            await runtime.send(sid, text)
        elif await runtime.resume_if_needed(sid, failed=True):
            if sess.status.value == "Failed":
                click.secho(
                    f"continuing Failed session {sid} from where it stopped",
                    fg="bright_black",
                    err=True,
                )
        else:
            click.echo(_nothing_to_resume(sid, sess.status.value))
            return 0
        await runtime.wait_idle(sid)
        if printer.failed and store.get_session(sid).status.value == "Failed":
            click.secho(
                f"session {sid} is Failed; to continue it from where it stopped (a failed "
                f"LLM call is made again): xclaw run --session {sid}",
                fg="yellow",
                err=True,
            )
        return 1 if printer.failed else 0
    except XclawError as e:
        click.secho(f"error: {e.message}", fg="red", err=True)
        return 2
    finally:
        await runtime.shutdown()
        store.close()


def register(cli: click.Group) -> None:
    @cli.command("run")
    @click.argument("text", required=False, default="")
    @click.option("--session", "-r", "session", metavar="ID", help="Continue this session (created if unknown).")
    @click.option("--continue", "-c", "cont", is_flag=True, help="Continue the most recently updated session.")
    @click.option(
        "--approval",
        type=click.Choice(["ask", "auto-edits", "yolo"]),
        default=None,
        help="ask: confirm edits and shell on the terminal (denied when there is no terminal); "
        "auto-edits: file edits run without asking; yolo: everything runs except the deny-list.",
    )
    @click.option("--db", default=None, help="SQLite path or postgresql:// URL (default: $XCLAW_DB or $XCLAW_HOME/xclaw.db).")
    @click.option("--workspace", default=None, help="Workspace root (default: $XCLAW_HOME/workspaces).")
    def run_cmd(text: str, session: str | None, cont: bool, approval: str | None, db: str | None, workspace: str | None) -> None:
        """Run a task headless, in this process, printing the conversation.

        \b
        xclaw run "list the files and count the lines"      new session
        xclaw run --continue "now sort them"                 most recent session
        xclaw run --session ID                               resume an interrupted or Failed session
        """
        if text and text.startswith("/"):
            raise click.UsageError("slash commands work in `xclaw chat`; offline use `xclaw steps/rollback/fork`")
        try:
            code = asyncio.run(_run(db, session, cont, text, approval, workspace))
        except XclawError as e:  # e.g. a bad xclaw.yaml, found before anything started
            click.secho(f"error: {e.message}", fg="red", err=True)
            code = 2
        sys.exit(code)
