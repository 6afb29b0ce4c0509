"""[demo] `xclaw demo`: the original tutorial's "try it" walk (*the seed*, docs/architecture.md
glossary), done for real in one command — a server killed with SIGKILL mid-tool, restarted,
resumed without repeating anything; /steps and the trace tree; rollback and fork with the
workspace following the memory; a payment recorded in a ledger database outside the workspace,
reversed by the rollback's compensation. Every stage checks what it claims and the demo fails
loudly (exit 1) if anything does not behave as described."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from xclaw.demo.process import Client, Frame, ServerProcess
from xclaw.llm.prices import PriceTable
from xclaw.security.credentials import SERVER_TOKEN_PREFIX, issue_token
from xclaw.store import open_store
from xclaw.store.steps.model import Step, StepStatus, StepType
from xclaw.terminal.render import Renderer, make_console
from xclaw.views.branch_diff import MARKS, align, describe
from xclaw.views.record import format_sessions, format_tree

TASK = (
    "Prepare a release note in this workspace: list the files; record the facts with "
    "`echo facts >> effects.log && printf '3 modules\\n12 tests\\n' > facts.txt`; write draft.txt; "
    "run the release checks with `sleep 3 && echo checks >> effects.log`; ask a sub-agent for a "
    "title; put the title into draft.txt."
)


# A real model's replies in this walk are short; the cap keeps one that rambles (a small local
# model repeating itself) from holding a stage for its whole default 4096 tokens per call.
REAL_MODEL_MAX_TOKENS = 512
REAL_MODEL_LIMITS = f"max_tokens: {REAL_MODEL_MAX_TOKENS}\n"


class DemoFailure(Exception):
    """A stage did not behave as the demo says it does."""


@dataclass
class Options:
    model: str | None = None
    home: Path | None = None


class Walkthrough:
    def __init__(self, opts: Options, console: Console | None = None) -> None:
        self.opts = opts
        self.console = console or make_console()
        self.render = Renderer(self.console)
        self.scripted = opts.model is None
        self.home = opts.home or Path(tempfile.mkdtemp(prefix="xclaw-demo-"))
        self.home.mkdir(parents=True, exist_ok=True)
        self.db = self.home / "xclaw.db"
        self.token = issue_token(SERVER_TOKEN_PREFIX)  # the form xclaw's own tokens have
        self.server = ServerProcess(self.home, self._env(), self.token)
        self.stage = 0
        self.started = time.monotonic()

    # --- set-up -----------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XCLAW_")}
        config = self.home / "xclaw.yaml"
        # yolo: tools run without asking — except a call that may already have run, which
        # always needs a human (no blind repeat). That is the approval this demo shows.
        # The ledger tool: a Python tool with a compensation (xclaw/demo/ledger.py).
        config.write_text(
            "approval:\n  mode: yolo\n"
            "tools: ['xclaw.demo.ledger:record_payment']\n"
            + ("" if self.scripted else REAL_MODEL_LIMITS)
        )
        if self.scripted:
            script = self.home / "demo-script.json"
            script.write_text(resources.files("xclaw.demo").joinpath("script.json").read_text())
            model = f"script:{script}"
        else:
            model = str(self.opts.model)
        env.update(
            {
                "XCLAW_HOME": str(self.home),
                "XCLAW_DB": str(self.db),
                "XCLAW_MODEL": model,
                "XCLAW_TOKEN": self.token,
                "XCLAW_CONFIG": str(config),
                "XCLAW_DEMO_LEDGER": str(self.home / "ledger.db"),
                "NO_COLOR": "1",
            }
        )
        return env

    def say(self, text: str) -> None:
        self.stage += 1
        self.console.print()
        self.console.print(Text(f"[{self.stage}] {text}", style="bold yellow"))

    def note(self, text: str) -> None:
        self.console.print(Text(f"    {text}", style="yellow"))

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            raise DemoFailure(what)
        self.console.print(Text(f"    ✓ {what}", style="green"))

    def show(self, frame: Frame) -> None:
        if frame.get("type") == "history" and self.stage > 4:
            return  # shown once, after the restart; later attaches would only repeat it
        if frame.get("type") == "approval_request":
            self.render.approval(frame)
        elif frame.get("type") not in ("step", "status", "steps", "pong"):
            self.render.frame(frame)

    # --- the walk -----------------------------------------------------------------------------
    async def run(self) -> None:
        what = (
            "scripted model, no API key"
            if self.scripted
            else f"model {self.opts.model}, replies capped at {REAL_MODEL_MAX_TOKENS} tokens"
        )
        self.say(f"Starting a real `xclaw serve` (SQLite database, {what}).")
        self.server.start()
        self.note(
            f"server pid {self.server.proc.pid if self.server.proc else '?'} on {self.server.url}; home {self.home}"
        )

        sid = await self.first_run_and_crash()
        await self.resume_after_restart(sid)
        self.exactly_once(sid)
        await self.steps_and_tree(sid)
        await self.rollback(sid)
        fork_id = await self.fork(sid)
        self.compare(sid, fork_id)
        await self.payment_reversed(sid)
        self.finish()

    async def first_run_and_crash(self) -> str:
        if self.scripted:
            self.say("A multi-step task. The server will be killed in the middle of a tool call.")
        else:
            # A real model chooses its own steps: the crash comes at the first one in flight
            # (its LLM call is recorded `running` before the request goes out).
            self.say("A multi-step task. The server will be killed while the model is answering.")
        client = await Client.attach(self.server, None, self.show)
        sid = str(client.session_id)
        self.console.print(Text(f"You: {TASK}", style="bold"))
        await client.say(TASK)

        def crash_point(f: Frame) -> bool:
            if f.get("type") in ("error", "reply"):
                return True
            if not self.scripted:
                step = f.get("step") if f.get("type") == "step" else None
                return isinstance(step, dict) and step.get("status") == "running"
            return (
                f.get("type") == "tool"
                and f.get("state") == "running"
                and "sleep" in str(f.get("input"))
            )

        frame = await client.until(crash_point, within_s=30 if self.scripted else 180)
        if frame.get("type") == "error":
            raise DemoFailure(f"the run failed before the crash point: {frame.get('content')}")
        if frame.get("type") == "reply":
            raise DemoFailure("the model answered without running the slow tool call to crash in")
        if self.scripted:
            await asyncio.sleep(1.0)
            self.say("kill -9: SIGKILL the server while that tool call is still running.")
        else:
            self.say("kill -9: SIGKILL the server while the model's call is in flight.")
        self.server.kill()
        await client.close()
        kinds = (StepType.TOOL_CALL,) if self.scripted else (StepType.TOOL_CALL, StepType.LLM_CALL)
        running = [
            s for s in self._steps(sid) if s.status is StepStatus.RUNNING and s.step_type in kinds
        ]
        what = "call" if self.scripted else f"{running[0].step_type.value}" if running else "step"
        self.check(
            len(running) == 1,
            f"the database holds the interrupted {what} as `running` ({running[0].display_id if running else '-'}): recorded before it happened",
        )
        return sid

    async def resume_after_restart(self, sid: str) -> None:
        self.say(
            "Restart the server and reconnect with the same session id (as `xclaw chat` does from .cli_session)."
        )
        self.server.start()
        client = await Client.attach(self.server, sid, self.show)
        history = await client.until(lambda f: f.get("type") == "history")
        self.check(
            "sleep 3" in str(history.get("messages")), "the history came back from the database"
        )
        if self.scripted:
            await client.until(
                lambda f: f.get("type") == "notice" and "[resume]" in str(f.get("content"))
            )
            request = await client.until(lambda f: f.get("type") == "approval_request", within_s=30)
            self.check(
                bool(request.get("maybeRepeated")),
                "the model re-issued the interrupted call: xclaw asks first, warning it may already have run",
            )
            self.note("The demo answers y, as you would.")
            await client.send(
                {"type": "approval", "sessionId": sid, "stepId": request["stepId"], "approve": True}
            )
        since = client.mark() if self.scripted else 0  # the scripted approval is answered
        reply = await self._answer_until_done(client, since, within_s=120 if self.scripted else 300)
        if reply.get("type") == "error":
            raise DemoFailure(f"the resumed run failed: {reply.get('content')}")
        self.check(reply.get("type") == "reply", "the task finished after the restart")
        await client.close()

    async def _answer_until_done(self, client: Client, since: int, within_s: float) -> Frame:
        """The run's reply or error. A real model may re-issue the interrupted call, which
        xclaw asks about (it may already have run): the demo says yes, as you would."""
        while True:
            frame = await client.until(
                lambda f: f.get("type") in ("reply", "error", "approval_request"),
                within_s=within_s,
                since=since,
                quiet=not self.scripted,
            )
            since = client.frames.index(frame) + 1
            if frame.get("type") != "approval_request":
                return frame
            self.note("The demo answers y, as you would.")
            await client.send(
                {
                    "type": "approval",
                    "sessionId": client.session_id,
                    "stepId": frame["stepId"],
                    "approve": True,
                }
            )

    def exactly_once(self, sid: str) -> None:
        self.say("Count the side effects: nothing that completed ran twice.")
        effects = self._workspace(sid) / "effects.log"
        lines = effects.read_text().split() if effects.exists() else []
        steps = self._steps(sid)
        interrupted = [s for s in steps if s.interrupted]
        self.note(f"effects.log: {lines}")
        self.note(f"interrupted and kept in the record: {[s.display_id for s in interrupted]}")
        if self.scripted:
            self.check(
                lines == ["facts", "checks"],
                "`facts` ran once (completed before the crash, not repeated); `checks` ran once (the killed attempt died with the server, the approved retry completed)",
            )
        completed = [
            s
            for s in steps
            if s.step_type is StepType.TOOL_CALL and s.status is StepStatus.COMPLETED
        ]
        ids = [s.call_id for s in completed]
        self.check(
            len(ids) == len(set(ids)), f"{len(completed)} completed tool calls, none executed twice"
        )

    async def steps_and_tree(self, sid: str) -> None:
        self.say("/steps and the trace tree (which decision caused which step, how long it took).")
        client = await Client.attach(self.server, sid, lambda f: None)
        mark = client.mark()
        # Enough rows to reach back to the interrupted step just explained.
        steps = self._steps(sid)
        first = min((x.seq for x in steps if x.interrupted), default=steps[-1].seq)
        await client.say(f"/steps {sum(1 for x in steps if x.seq >= first)}")
        notice = await client.until(lambda f: f.get("type") == "notice", since=mark)
        self.console.print(Text(str(notice["content"]), style="cyan"))
        await client.close()
        store = open_store(str(self.db))
        try:
            tree = format_tree(store.record.step_tree(sid), PriceTable.with_overrides(None))
            self.console.print(Text(tree, style="white"))
        finally:
            store.close()

    async def rollback(self, sid: str) -> None:
        self.say("A new instruction, then /rollback: the steps *and* the files they made are gone.")
        client = await Client.attach(self.server, sid, self.show)
        files_before = self._files(sid)
        mark = client.mark()
        await client.say("Also add a changelog file.")
        await self._answer_until_done(client, mark, within_s=60 if self.scripted else 300)
        changelog = self._workspace(sid) / "CHANGELOG.md"
        if self.scripted:
            self.check(changelog.exists(), "CHANGELOG.md was written")
        target = [s for s in self._steps(sid) if s.step_type is StepType.USER_INPUT][-1]
        mark = client.mark()
        await client.say(f"/rollback {target.display_id}")
        await client.until(
            lambda f: f.get("type") in ("notice", "error") and "rollback" in str(f.get("content")),
            since=mark,
        )
        later = [s for s in self._steps(sid) if s.seq >= target.seq]
        self.check(not later, f"{target.display_id} and every later step are deleted")
        if self.scripted:
            self.check(
                not changelog.exists(),
                "CHANGELOG.md is gone too: the workspace was rewound with the memory",
            )
        else:
            self.check(
                self._files(sid) == files_before,
                "the workspace is back to what it was before that instruction (files rewound with the memory)",
            )
        await client.close()

    async def fork(self, sid: str) -> str:
        steps = self._steps(sid)
        if self.scripted:
            draft = next(
                s for s in steps if s.name == "write_file" and s.status is StepStatus.COMPLETED
            )
            self.say(
                f"/fork {draft.display_id}: branch a new session just after the first draft; the original stays."
            )
        else:  # the model chose its own steps: branch just after its last answer
            draft = [s for s in steps if s.step_type is StepType.LLM_CALL][-1]
            self.say(
                f"/fork {draft.display_id}: branch a new session just after the model's answer; the original stays."
            )
        before = [(s.step_id, s.status) for s in self._steps(sid)]
        client = await Client.attach(self.server, sid, self.show)
        mark = client.mark()
        await client.say(f"/fork {draft.display_id} shorter-notes")
        forked = await client.until(lambda f: f.get("type") == "forked", since=mark)
        fork_id = str(forked["sessionId"])
        await client.close()
        self.note("switching to the fork")
        branch = await Client.attach(self.server, fork_id, self.show)
        mark = branch.mark()
        self.console.print(Text("You: Make the note shorter instead.", style="bold"))
        await branch.say("Make the note shorter instead.")
        await self._answer_until_done(branch, mark, within_s=60 if self.scripted else 300)
        await branch.close()
        if self.scripted:
            self.check(
                (self._workspace(sid) / "draft.txt").read_text()
                != (self._workspace(fork_id) / "draft.txt").read_text(),
                "the two branches now hold different draft.txt files",
            )
        else:
            copied = [s.seq for s in self._steps(fork_id) if s.seq <= draft.seq]
            self.check(
                copied == [s.seq for s in self._steps(sid) if s.seq <= draft.seq],
                f"the fork holds the history up to {draft.display_id}, then its own turn",
            )
        self.check(
            [(s.step_id, s.status) for s in self._steps(sid)] == before,
            "the original session is untouched",
        )
        return fork_id

    def compare(self, sid: str, fork_id: str) -> None:
        self.say("The two branches side by side, from the fork point on, aligned by content.")
        fork_point = self._session(fork_id).forked_from_seq or 0
        left = [s for s in self._steps(sid) if s.seq > fork_point]
        right = [s for s in self._steps(fork_id) if s.seq > fork_point]
        rows = align(left, right)
        table = Table(show_lines=False, expand=False)
        table.add_column(f"original {sid[:8]}…", overflow="fold")
        table.add_column("", justify="center")
        table.add_column(f"fork {fork_id[:8]}…", overflow="fold")
        for r in rows:
            table.add_row(
                _describe(r.left) if r.left else "",
                MARKS[r.kind],
                _describe(r.right) if r.right else "",
            )
        drafts = [self._workspace(x) / "draft.txt" for x in (sid, fork_id)]
        if all(d.exists() for d in drafts):  # the scripted walk writes them; a model may not
            first_lines = [(d.read_text().splitlines() or [""])[0] for d in drafts]
            table.add_row(
                Text("draft.txt: " + first_lines[0], style="bold"),
                "≠" if first_lines[0] != first_lines[1] else "=",
                Text("draft.txt: " + first_lines[1], style="bold"),
            )
        self.console.print(table)
        self.note(
            "= same · ≠ changed · ◀ ▶ only on one side; `xclaw diff` shows the same for any two sessions"
        )

    async def payment_reversed(self, sid: str) -> None:
        self.say(
            "Outside the workspace: the agent records a payment in a ledger database; "
            "/rollback reverses it."
        )
        ledger = self.home / "ledger.db"
        client = await Client.attach(self.server, sid, self.show)
        mark = client.mark()
        ask = "Record the payment of 120 to ACME Hosting in the ledger."
        self.console.print(Text(f"You: {ask}", style="bold"))
        await client.say(ask)
        await self._answer_until_done(client, mark, within_s=60 if self.scripted else 300)
        recorded = _ledger_rows(ledger)
        self.note(f"ledger.db (outside the workspace): {recorded}")
        if not recorded:
            if self.scripted:
                raise DemoFailure("the payment was not recorded in the ledger")
            self.note("The model did not call record_payment: nothing outside to reverse here.")
            await client.close()
            return
        target = [s for s in self._steps(sid) if s.step_type is StepType.USER_INPUT][-1]
        mark = client.mark()
        await client.say(f"/rollback {target.display_id}")
        preview = await client.until(
            lambda f: f.get("type") in ("rollback_preview", "error"), since=mark
        )
        self.check(
            preview.get("type") == "rollback_preview"
            and [e.get("tool") for e in preview.get("compensable") or ()] == ["record_payment"],
            "/rollback first shows the outside effect it will undo, and by what (nothing is done yet)",
        )
        self.note(f"You confirm: /rollback {target.display_id} --confirm")
        mark = client.mark()
        await client.say(f"/rollback {target.display_id} --confirm")
        rolled = await client.until(lambda f: f.get("type") in ("rolledback", "error"), since=mark)
        if rolled.get("type") == "error":
            raise DemoFailure(f"the rollback failed: {rolled.get('content')}")
        await client.close()
        self.check(not _ledger_rows(ledger), "the payment is reversed: the ledger is empty again")
        comps = [s for s in self._steps(sid) if s.name == "compensation"]
        self.check(
            len(comps) == 1 and comps[0].status is StepStatus.COMPLETED,
            f"the trace keeps the compensation ({comps[0].display_id if comps else '-'}): what "
            "undid the payment, who asked, when",
        )
        store = open_store(str(self.db))
        try:
            tree = format_tree(store.record.step_tree(sid), PriceTable.with_overrides(None))
        finally:
            store.close()
        shown = [line for line in tree.splitlines() if "rollback" in line or "compensation" in line]
        self.console.print(Text("\n".join(shown), style="white"))

    def finish(self) -> None:
        self.server.kill(signal.SIGTERM)
        elapsed = time.monotonic() - self.started
        self.say(f"Done in {elapsed:.0f} s. Everything above is in {self.db}")
        store = open_store(str(self.db))
        try:
            self.console.print(Text(format_sessions(store.record.list_sessions()), style="white"))
        finally:
            store.close()
        exe = _xclaw_command()
        self.note(f"{exe} sessions --db {self.db}")
        model = f"XCLAW_MODEL={self.server.env['XCLAW_MODEL']} " if self.scripted else ""
        self.note(f"{model}{exe} serve --db {self.db} --workspace {self.home / 'workspaces'}")
        self.note(
            "then open the printed http://127.0.0.1:3000/?token=… link: the sessions, their trace trees and the branch comparison are in the web page"
        )

    # --- reading the record -----------------------------------------------------------------------
    def _steps(self, sid: str) -> list[Step]:
        store = open_store(str(self.db))
        try:
            return store.record.steps(sid)
        finally:
            store.close()

    def _session(self, sid: str) -> Any:
        store = open_store(str(self.db))
        try:
            return store.record.get_session(sid)
        finally:
            store.close()

    def _workspace(self, sid: str) -> Path:
        return self.home / "workspaces" / sid

    def _files(self, sid: str) -> dict[str, bytes]:
        """The session's workspace files and their contents."""
        root = self._workspace(sid)
        if not root.exists():
            return {}
        return {
            str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
        }

    def cleanup(self) -> None:
        self.server.kill()


def _xclaw_command() -> str:
    """`xclaw` as the user can type it: the venv's script when it is not on PATH."""
    script = Path(sys.executable).with_name("xclaw")
    if shutil.which("xclaw") == str(script) or not script.exists():
        return "xclaw"
    return os.path.relpath(script) if not os.path.relpath(script).startswith("..") else str(script)


def _describe(s: Step) -> Text:
    """One cell of the comparison (a Text, so brackets are not read as rich markup)."""
    return Text(_describe_plain(s))


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _describe_plain(s: Step) -> str:
    dur = f" {s.duration_ms}ms" if s.duration_ms is not None else ""
    if s.step_type is StepType.LLM_CALL:
        text = (s.output_data or {}).get("text", "") if isinstance(s.output_data, dict) else ""
        return f"{s.display_id} llm{dur}: {_clip(text)}"
    if s.step_type is StepType.TOOL_CALL:
        state = "interrupted" if s.interrupted else s.status.value
        return f"{s.display_id} {s.name}{dur} [{state}]"
    if s.step_type is StepType.USER_INPUT:
        return f"{s.display_id} user: {_clip(str(s.input_data))}"
    if s.name == "approval":
        return describe(s, 40)  # in words: what was asked, what was answered
    return f"{s.display_id} {s.name}"


def _ledger_rows(path: Path) -> list[tuple[Any, ...]]:
    """The demo ledger's payments (none before its first)."""
    if not path.exists():
        return []
    import sqlite3

    conn = sqlite3.connect(path, timeout=10)
    try:
        return conn.execute("SELECT id, payee, amount FROM payments").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
