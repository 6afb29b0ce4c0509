"""[cli] `xclaw chat`: the terminal client of the gateway.

Two activities share one event loop: the connection (connect, `reconnect`, read frames,
reconnect with backoff when the server goes away: the Python API's own reconnect loop,
xclaw/api/connection.py, with its constants) and the input (a prompt_toolkit line editor
on a terminal; plain lines from stdin otherwise). Piped lines are read only when the client
is ready for them — attached, and no reply pending unless an approval needs an answer — so
they are sent one turn at a time, exactly like a person typing after each answer. On a
terminal the prompt stays while a run is in flight (under the working line): a line typed
then is sent with the session's busy policy, or the one its command names (`/queue TEXT`,
`/steer TEXT`, `/interrupt TEXT`; docs/protocol.md, "Input while a run is busy"), and the
run's output is printed above the prompt, a finished line at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidURI

from xclaw.api.connection import CLOSE_FORBIDDEN_ORIGIN, CLOSE_UNAUTHORIZED, Drop, Reconnecting
from xclaw.cli.chat_completion import SlashCompleter
from xclaw.cli.chat_spinner import Spinner
from xclaw.errors import XclawError
from xclaw.security.private_files import private_dir, private_file
from xclaw.store.steps.model import parse_step_ref
from xclaw.terminal.invocation import xclaw_command
from xclaw.terminal.render import Renderer
from xclaw.views.outside_effects import describe_outside, describe_preview, outside_marks_json
from xclaw.wire.frames import (
    ApprovalRequestFrame,
    DeltaFrame,
    ErrorFrame,
    ForkedFrame,
    HistoryFrame,
    NoticeFrame,
    ReplyFrame,
    ServerFrame,
    SessionFrame,
    StatusFrame,
    StepFrame,
    StepsFrame,
    ToolFrame,
    ToolResultMessage,
    decode_frame,
)
from xclaw.wire.protocol import parse_command

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

SESSION_FILE = ".cli_session"
# How long one attempt to connect may take: a person is waiting for the offline line.
OPEN_TIMEOUT_S = 5.0
# Under the gateway's /help list (xclaw.gateway.commands.HELP_TEXT): what only this client
# handles itself, in the same columns.
CLIENT_HELP = (
    "  /queue TEXT           while the agent works: TEXT runs after the run (also /steer TEXT:\n"
    "                        given to the model at its next tool boundary; /interrupt TEXT:\n"
    "                        the run stops, then TEXT runs); a plain line then follows /busy\n"
    "  /quit, /exit          leave xclaw chat (also Ctrl+D)"
)
# A line typed while a run is in flight that names what it does (docs/protocol.md).
BUSY_WORDS = {"/queue": "queue", "/steer": "steer", "/interrupt": "interrupt"}
BUSY_PROMPT = "You (busy): "
YES = ("y", "yes")
# `n <reason>` / `no: <reason>` at an approval prompt: a denial the model is told why of.
_DENIAL = re.compile(r"^\s*no?\s*[:,-]?\s+(\S.*)$|^\s*no?\s*:\s*(\S.*)$", re.IGNORECASE)


def denial_reason(line: str) -> str | None:
    """The reason given with a denial at the approval prompt (`n use the staging db`)."""
    found = _DENIAL.match(line)
    return None if found is None else (found.group(1) or found.group(2)).strip()


OFFLINE_REMINDER_S = 30.0
SPIN_INTERVAL_S = 0.12


# --- session file and URL -------------------------------------------------------------------


def read_session_file(path: Path) -> str | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text.splitlines()[0].strip() if text else None


def write_session_file(path: Path, session_id: str) -> None:
    """Mode 0600: the id is a capability to the conversation for anyone holding the token."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(session_id + "\n")
    os.chmod(path, 0o600)


def ws_url(url: str) -> tuple[str, str | None]:
    """`http://host:port/?token=T` (the banner's link), `ws://host:port/ws` or `host:port` →
    (ws://host:port/ws without the token, T or None)."""
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None:
        raise ValueError(
            f"unsupported URL scheme in {url!r}: use http://, https://, ws:// or wss://"
        )
    query = parse_qs(parts.query)
    token = query.pop("token", [None])[0]
    path = parts.path.rstrip("/")
    if not path.endswith("/ws"):
        path += "/ws"
    rest = urlencode({k: v[0] for k, v in query.items()})
    return urlunsplit((scheme, parts.netloc, path, rest, "")), token


@dataclass(frozen=True)
class ChatOptions:
    url: str  # ws://host:port/ws
    token: str | None
    session_id: str | None
    session_file: Path
    history_file: Path | None = None
    # --session ID: an existing session (a unique prefix will do), never a new one by typo.
    explicit: bool = False
    token_source: str = ""  # where the token came from ("--token", "XCLAW_TOKEN", …)


# --- input ----------------------------------------------------------------------------------


class LineInput(Protocol):
    interactive: bool

    async def read(
        self, prompt: Any, *, answer: bool = False, transient: bool = False
    ) -> str | None:
        """One line without its newline; None at end of input. A terminal raises
        KeyboardInterrupt on Ctrl+C. `answer`: a y/n approval answer, kept out of the
        input history. `prompt`: its text, or a function that gives it at each drawing.
        `transient`: the prompt is erased once answered (the caller says what was typed)."""
        ...

    def abandon(self) -> None:
        """Withdraw the approval question being asked (the run stopped, or another client
        answered): the pending `read(answer=True)` raises PromptAbandoned."""
        ...

    def use_completer(self, completer: Any) -> None:
        """Tab completion of what is typed (where there is a line editor)."""
        ...

    def withdraw(self) -> None:
        """Withdraw the instruction prompt being shown (the run it was shown beside ended,
        or one began): the pending `read` raises PromptAbandoned; what was typed is kept
        for the next one."""
        ...

    def redraw(self) -> None:
        """Draw the prompt afresh (its working line changed)."""
        ...


class PromptAbandoned(Exception):
    """The question a prompt asked no longer stands; ask again from the current state."""


class PipeInput:
    """Lines from a non-terminal stdin, read ahead by a daemon thread (a blocked read must
    never keep the process alive), consumed one at a time when the client is ready."""

    interactive = False

    def __init__(self, renderer: Renderer, stream: Any = None) -> None:
        self.renderer = renderer
        self.stream = stream or sys.stdin
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._started = False

    def _start(self) -> None:
        loop = asyncio.get_running_loop()

        def pump() -> None:
            for raw in self.stream:
                loop.call_soon_threadsafe(self._queue.put_nowait, raw.rstrip("\r\n"))
            loop.call_soon_threadsafe(self._queue.put_nowait, None)

        threading.Thread(target=pump, name="xclaw-chat-stdin", daemon=True).start()
        self._started = True

    def abandon(self) -> None:
        """Piped lines are answers in order; one read for a withdrawn question is taken as
        an instruction instead (ChatClient.input_loop)."""

    def use_completer(self, completer: Any) -> None:
        """Nothing is typed here: nothing to complete."""

    def withdraw(self) -> None:
        """Piped lines are read between turns only: no prompt stands beside a run."""

    def redraw(self) -> None:
        """No prompt is drawn."""

    async def read(
        self, prompt: Any, *, answer: bool = False, transient: bool = False
    ) -> str | None:
        if not self._started:
            self._start()
        line = await self._queue.get()
        if line is not None:
            self.renderer.line(prompt + line, "bold")  # a transcript shows what was "typed"
        return line


class TerminalInput:
    """prompt_toolkit line editor with a persistent history."""

    interactive = True

    def __init__(self, history_file: Path | None) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history: Any = InMemoryHistory()
        if history_file is not None:
            try:
                # What you typed is as private as the conversation: 0700 home, 0600 file.
                private_dir(history_file.parent)
                os.close(os.open(history_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
                private_file(history_file)
                history = FileHistory(str(history_file))
            except OSError:
                pass
        self.session: PromptSession[str] = PromptSession(
            history=history, complete_while_typing=False
        )
        # Approval answers (y/n) get a history of their own: Up never brings back a "y".
        self.answers: PromptSession[str] = PromptSession(history=InMemoryHistory())
        self._kept = ""  # typed at a prompt withdrawn: given to the next one

    def abandon(self) -> None:
        app = self.answers.app
        if app.is_running:
            app.exit(exception=PromptAbandoned())

    def withdraw(self) -> None:
        app = self.session.app
        if app.is_running and not app.is_done:
            self._kept = self.session.default_buffer.text
            app.erase_when_done = True  # a prompt nobody answered leaves no trace
            app.exit(exception=PromptAbandoned())

    def redraw(self) -> None:
        """Erased and drawn whole (not only the cells that changed), so that what reaches
        the terminal reads as the line it shows."""
        app = self.session.app
        if app.is_running and not app.is_done:
            app.renderer.erase(leave_alternate_screen=False)
            app.invalidate()

    def use_completer(self, completer: Any) -> None:
        """Tab completes slash commands, step ids and session ids (SlashCompleter)."""
        self.session.completer = completer

    async def read(
        self, prompt: Any, *, answer: bool = False, transient: bool = False
    ) -> str | None:
        from prompt_toolkit.patch_stdout import patch_stdout

        session = self.answers if answer else self.session
        kept, self._kept = ("", self._kept) if answer else (self._kept, "")
        session.app.erase_when_done = transient
        # Output is routed around the prompt only while a prompt is shown: frames printed
        # between prompts go straight to the terminal, in order; a streamed answer is
        # printed a finished line at a time (Renderer.whole_lines), so a half-written line
        # can never end up behind the prompt.
        try:
            with patch_stdout(raw=True):
                # handle_sigint=False: our own SIGINT handler (cancel, then quit) stays.
                return await session.prompt_async(prompt, handle_sigint=False, default=kept)
        except EOFError:
            return None


# --- the client ------------------------------------------------------------------------------


class ChatClient:
    def __init__(self, opts: ChatOptions, renderer: Renderer, line_input: LineInput) -> None:
        self.opts = opts
        self.out = renderer
        self.input = line_input
        self.session_id = opts.session_id
        self._attached = opts.session_id  # what the server last confirmed (`session` frame)
        self.exit_code = 0
        self._ws: ClientConnection | None = None
        self._quit = asyncio.Event()
        self._changed = asyncio.Event()
        # None: idle. "attach": waiting for the post-attach status. "run": waiting for the
        # turn's reply. "command": waiting for a slash command's notice.
        self.turn: str | None = "attach"
        self._fail_seen = False
        # Approvals waiting for an answer here: the typed request and the frame as received.
        self.approvals: list[tuple[ApprovalRequestFrame, dict[str, Any]]] = []
        self._asking: tuple[ApprovalRequestFrame, dict[str, Any]] | None = None
        self._interrupts = 0
        self._eof = False
        self._help_asked = False  # the next notice answers /help
        # What Tab completes: step ids and session ids seen in frames.
        self.step_ids: set[str] = set()
        self.session_ids: set[str] = set()
        console = renderer.console
        # On a terminal the prompt stays while a run is in flight: a line typed then follows
        # the session's busy policy; the working line is drawn by that prompt, and the
        # run's output is printed above it a finished line at a time.
        self.busy_input = line_input.interactive
        renderer.whole_lines = self.busy_input
        self.spinner = Spinner(console.file, enabled=line_input.interactive and console.is_terminal)
        self._prompting: str | None = None  # the prompt shown: "idle", "busy", "approval"
        self._busy_sent: set[str] = set()  # ids of lines sent while a run was in flight
        self._commands_due = 0  # commands sent while a run was in flight, not yet answered
        self._offline_since: float | None = None
        self._offline_said = 0.0
        # --session: resolve it like /switch once (existing sessions, unique prefixes).
        self._resolve: str | None = opts.session_id if opts.explicit else None
        self._resolving: str | None = None
        self._ever_connected = False
        line_input.use_completer(SlashCompleter(self))

    # --- state ------------------------------------------------------------------------------
    def _set_turn(self, turn: str | None) -> None:
        if turn == "run" and self.turn != "run":
            self.spinner.start()
        elif turn != "run":
            self.spinner.stop()
            self._commands_due = 0
        self.turn = turn
        self._fail_seen = False
        self._changed.set()
        self._reprompt()

    def _reprompt(self) -> None:
        """The prompt shown is not the one the state asks for (a run began or ended beside
        it, an approval waits): withdrawn, what was typed kept for the next."""
        if self._prompting in ("idle", "busy") and self._prompting != self._wanted_prompt():
            self.input.withdraw()

    def _wanted_prompt(self) -> str | None:
        if not self.ready:
            return None
        if self.approvals and self.turn != "attach":
            return "approval"
        return "busy" if self.turn == "run" else "idle"

    def _busy_prompt(self) -> str:
        """The prompt while a run is in flight: the working line, then where to type."""
        working = self.spinner.text() if not self.approvals else None
        return f"{working}\n{BUSY_PROMPT}" if working else BUSY_PROMPT

    def _time_step(self, f: ServerFrame) -> None:
        """The spinner times the step in flight: a tool from its `running` frame (after any
        approval), a model call from its `running` step."""
        if isinstance(f, ToolFrame) and f.state == "running":
            self.spinner.step(f"running {f.name}", f.step_id or None)
        elif isinstance(f, StepFrame) and f.step.type == "llm_call" and f.step.status == "running":
            self.spinner.step("thinking", f.step.id or None)
        elif isinstance(f, DeltaFrame):
            self.spinner.label = "thinking"

    def _say(self, text: str, style: str | None = None) -> None:
        self.spinner.clear()
        self.out.line(text, style)

    @property
    def ready(self) -> bool:
        return self._ws is not None and (
            self.turn is None
            or (bool(self.approvals) and self.turn != "attach")
            or (self.busy_input and self.turn == "run")
        )

    def quit(self, code: int = 0) -> None:
        self.exit_code = code
        self._quit.set()
        self._changed.set()

    # --- frames in --------------------------------------------------------------------------
    # Every frame is read into its typed class (xclaw/wire/frames.py) before the client acts on
    # it; the renderer, shared with `xclaw run` and the demo, shows the frame as received.
    def receive(self, raw: str | bytes) -> None:
        """One frame off the socket: decoded, then acted on. A type this client does not know
        is ignored (docs/protocol.md); one that does not follow its declaration is named."""
        try:
            data = json.loads(raw)
            frame = decode_frame(data)
        except ValueError as e:  # not JSON, or BadServerFrame
            self._say(f"[warning] ignored a frame this client cannot read: {e}", "yellow")
            return
        if frame is not None:
            self.on_frame(frame, data)

    def on_frame(self, f: ServerFrame, raw: dict[str, Any]) -> None:
        sid = getattr(f, "session_id", None)
        if (
            sid
            and self.session_id
            and sid != self.session_id
            and not isinstance(f, SessionFrame | ForkedFrame | ErrorFrame)
        ):
            return  # a late frame of the session we just switched away from
        self.spinner.clear()
        self._learn_ids(f)
        self._time_step(f)
        if isinstance(f, ErrorFrame) and f.code == "unauthorized":
            self._unauthorized()  # the close that follows says the same: one line for both
            return
        if isinstance(f, ApprovalRequestFrame):
            if not any(a.step_id == f.step_id for a, _ in self.approvals):
                self.out.approval(raw)
                self.approvals.append((f, raw))
                self._changed.set()
                self._reprompt()  # the question comes before what was being typed
            return
        if self._resolve_frame(f, raw):
            return
        self.out.frame(raw)
        if isinstance(f, NoticeFrame) and self._help_asked:
            self._help_asked = False
            self.out.line(CLIENT_HELP)  # the gateway's list, and what only this client does
        if isinstance(f, SessionFrame):
            self.session_id = self._attached = f.session_id
            try:
                write_session_file(self.opts.session_file, self.session_id)
            except OSError as e:
                self._say(f"warning: cannot save {self.opts.session_file}: {e}", "yellow")
        elif isinstance(f, StatusFrame):
            if f.busy is not None:  # the gateway's word after attaching: is a run in flight?
                self._set_turn("run" if f.busy else None)
            elif f.status == "Failed" and self.turn == "run":
                self._fail_seen = True  # the error or notice explaining it follows
        elif isinstance(f, ReplyFrame):
            if self.turn == "run":
                self._set_turn(None)
        elif isinstance(f, ErrorFrame):
            if self.turn == "attach" and f.code in (
                "bad_frame",
                "bad_command",
                "unknown_session",
                "ambiguous_session",
            ):
                # a refused /switch (unknown, ambiguous or malformed id): still where it was
                self.session_id = self._attached
                self._set_turn(None)
            elif f.message_id is not None and f.message_id in self._busy_sent:
                self._busy_sent.discard(f.message_id)  # a line typed beside the run refused
            elif self.turn == "run" and self._commands_due and not self._fail_seen:
                self._commands_due -= 1  # a command typed beside the run refused
            elif self.turn in ("run", "command"):
                self._set_turn(None)
        elif isinstance(f, NoticeFrame):
            if self.turn == "run" and self._commands_due and not self._fail_seen:
                self._commands_due -= 1  # a command typed beside the run answered
            elif self.turn == "command" or (self.turn == "run" and self._fail_seen):
                self._set_turn(None)
        elif (
            isinstance(f, StepFrame)
            and f.step.type == "user_input"
            and f.step.agent == "main"
            and self.turn is None
        ):
            # A run began without this client's asking: a queued message's, or one another
            # client of the session sent.
            self._set_turn("run")
        elif isinstance(f, StepFrame) and f.step.status != "running":
            # an approval answered (here or by another client) is no longer pending
            self.approvals = [a for a in self.approvals if a[0].step_id != f.step.id]
            if self._asking is not None and self._asking not in self.approvals:
                self.input.abandon()  # its "Approve?" question no longer stands

    def _resolve_frame(self, f: ServerFrame, raw: dict[str, Any]) -> bool:
        """`--session ID` names an existing session: when the gateway attached a new one under
        that id instead, ask it to resolve the id as /switch does (unique prefixes); when it
        cannot, say so and start a new session rather than one named after a typo. True: the
        frame was handled here (not shown)."""
        if isinstance(f, SessionFrame) and self._resolve is not None:
            wanted, self._resolve = self._resolve, None
            if f.created and f.session_id == wanted:
                self._resolving = wanted
                asyncio.get_running_loop().create_task(
                    self.send(
                        {"type": "message", "sessionId": wanted, "content": f"/switch {wanted}"}
                    )
                )
                return True
            return False
        if self._resolving is None:
            return False
        if isinstance(f, HistoryFrame | StatusFrame) and f.session_id == self._resolving:
            return True  # of the placeholder session: the resolved one's frames follow
        if isinstance(f, ErrorFrame):
            wanted, self._resolving = self._resolving, None
            self.out.frame(raw)
            self._say(f"no session matches {wanted!r}: starting a new session instead", "yellow")
            self.session_id = None
            asyncio.get_running_loop().create_task(
                self.send({"type": "reconnect", "sessionId": None})
            )
            return True
        if isinstance(f, SessionFrame):
            self._resolving = None
        return False

    def _learn_ids(self, f: ServerFrame) -> None:
        if isinstance(f, StepFrame):
            self.step_ids.add(f.step.id)
        elif isinstance(f, StepsFrame):
            self.step_ids.update(s.id for s in f.steps)
        elif isinstance(f, HistoryFrame):
            self.step_ids.clear()
            self.step_ids.update(
                m.step_id
                for m in f.messages
                if isinstance(m, ToolResultMessage) and m.step_id is not None
            )
        elif isinstance(f, SessionFrame | ForkedFrame):
            self.session_ids.add(f.session_id)
        elif isinstance(f, NoticeFrame) and f.content.startswith("SESSION "):
            for row in f.content.splitlines()[1:]:
                word = row.split(" ", 1)[0]
                if word and not word.startswith(("this", "use")):
                    self.session_ids.add(word)

    # --- connection -------------------------------------------------------------------------
    async def connection_loop(self) -> None:
        """The Python API's reconnect loop (xclaw/api/connection.py), attaching the session of
        the moment on each connection, until the client quits."""
        await Reconnecting(
            self.opts.url,
            self.opts.token,
            on_open=self._connected,
            on_frame=self.receive,
            on_drop=self._dropped,
            open_timeout=OPEN_TIMEOUT_S,
            max_size=None,
            stop=self._quit,
        ).run()

    async def _connected(self, ws: ClientConnection) -> None:
        self._ever_connected = True
        self._offline_since = None
        self.turn = "attach" if self.turn in (None, "attach", "command") else self.turn
        if self.approvals:
            # The server says again what still waits (after the history): ask it afresh
            # there, not as an orphan prompt above the history.
            self.approvals = []
            self.input.abandon()
        await ws.send(json.dumps({"type": "reconnect", "sessionId": self.session_id}))
        self._ws = ws
        self._changed.set()

    def _dropped(self, drop: Drop, delay: float) -> bool:
        """The connection ended (or none was made): quit when the gateway refused this client
        or the URL is wrong; otherwise say so (once per outage) and connect again."""
        self._ws = None
        code, error, reason = drop.code, drop.error, ""
        if isinstance(error, ConnectionClosed):
            reason = error.rcvd.reason if error.rcvd else "connection lost"
        elif isinstance(error, InvalidURI):
            self._say(f"error: bad URL: {error}", "bold red")
            self.quit(2)
            return False
        elif error is not None:
            reason = str(error) or type(error).__name__
        if code == CLOSE_UNAUTHORIZED:
            self._unauthorized()
            return False
        if code == CLOSE_FORBIDDEN_ORIGIN:
            self.quit(2)
            return False
        if self._quit.is_set():
            return False
        self._offline(reason or f"closed ({code})", delay)
        return True

    def _unauthorized(self) -> None:
        """The token was refused: said once (the gateway's error frame and its close both
        mean it), with where the token came from and where a right one is, then exit 2."""
        if self._quit.is_set():
            return
        given = (
            f"the gateway refused the token from {self.opts.token_source}"
            if self.opts.token
            else "no access token found"
        )
        self._say(
            f"unauthorized: {given}. Pass --token, set XCLAW_TOKEN, or run on the server's "
            "machine (the token is in $XCLAW_HOME/token and in the server's start-up URL)",
            "bold red",
        )
        self.quit(2)

    def _offline(self, reason: str, delay: float) -> None:
        """Say once per outage what is wrong and what to do, then keep retrying quietly
        (a line every 30 s), instead of a line per attempt."""
        now = asyncio.get_running_loop().time()
        if self._offline_since is None:
            self._offline_since = now
            self._offline_said = now
            if not self._ever_connected:
                http = self.opts.url.replace("ws://", "http://").replace("wss://", "https://")
                http = http.removesuffix("/ws")
                self._say(
                    f"[offline] no xclaw server at {http} ({reason}). Start one in another "
                    f"terminal with `{xclaw_command()} serve` (or pass --url); this client "
                    "connects by itself as soon as it is up. Ctrl+C quits.",
                    "yellow",
                )
            else:
                self._say(f"[offline] {reason}; reconnecting by itself…", "yellow")
        elif now - self._offline_said >= OFFLINE_REMINDER_S:
            self._offline_said = now
            self._say(f"[offline] still trying ({now - self._offline_since:.0f}s)…", "yellow")

    async def send(self, frame: dict[str, Any]) -> bool:
        ws = self._ws
        if ws is None:
            self._say("not connected; try again when the client has reconnected", "yellow")
            return False
        try:
            await ws.send(json.dumps(frame))
            return True
        except ConnectionClosed:
            self._say("not sent: the connection was lost", "yellow")
            return False

    # --- input ------------------------------------------------------------------------------
    async def _wait_ready(self) -> None:
        while not self._quit.is_set() and not self.ready:
            self._changed.clear()
            if self.ready:
                return
            await self._changed.wait()

    async def input_loop(self) -> None:
        while not self._quit.is_set():
            await self._wait_ready()
            if self._quit.is_set():
                return
            if self._eof:
                # piped input ended: leave once nothing is left to wait for
                if self.approvals:
                    self._say(
                        "input ended with an approval pending; the session stays Paused", "yellow"
                    )
                self.quit(0)
                return
            approval = self.approvals[0] if self.approvals else None
            prompt: Any = "You: "
            if approval:
                prompt = "Approve? [y/N] "
            elif self.turn == "run":
                prompt = self._busy_prompt  # drawn afresh with the working line
            self._asking = approval
            self._prompting = self._wanted_prompt()
            beside = self._prompting == "busy"
            try:
                line = await self.input.read(prompt, answer=approval is not None, transient=beside)
            except KeyboardInterrupt:
                self._interrupt()
                continue
            except PromptAbandoned:
                continue
            finally:
                self._asking = None
                self._prompting = None
            if beside and line is not None and line.strip():
                self._say(BUSY_PROMPT + line, "dim")  # the working line is not kept
            if line is None:
                self._eof = True
                if not self.input.interactive and self.turn is not None:
                    continue  # wait for the reply in flight, then quit
                self.quit(0)
                return
            self._interrupts = 0
            if approval is not None and approval not in self.approvals:
                # Asked before the run stopped or another client answered: a y/n goes
                # nowhere; anything else is the next instruction, not lost.
                if line.strip().lower() in (*YES, "n", "no", ""):
                    self._say("(that approval is no longer waiting; nothing was sent)", "dim")
                    continue
                approval = None
            if approval is not None:
                if self.approvals and self.approvals[0] is approval:
                    self.approvals.pop(0)
                answer: dict[str, Any] = {
                    "type": "approval",
                    "sessionId": self.session_id,
                    "stepId": approval[0].step_id,
                    "approve": line.strip().lower() in YES,
                    "client": "chat",  # the record says who answered, and where
                }
                if (why := denial_reason(line)) is not None:
                    answer["message"] = why  # what the model is told (docs/approval.md)
                await self.send(answer)
                continue
            await self.handle_line(line)

    async def handle_line(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        word, _, rest = text.partition(" ")
        if word in BUSY_WORDS and rest.strip():
            await self._send_message(rest.strip(), BUSY_WORDS[word])
        elif word in ("/quit", "/exit"):
            self.quit(0)
        elif word in ("/switch", "/new"):
            # The gateway resolves the id (existing sessions only, unique prefixes) and
            # re-attaches this socket; its `session` frame saves .cli_session.
            self.approvals = []
            self._set_turn("attach")
            if not await self.send(
                {"type": "message", "sessionId": self.session_id, "content": text}
            ):
                self._set_turn(None)
        elif parse_command(text) is not None:
            if word == "/rollback":
                confirmed = await self._confirm_rollback(rest)
                if confirmed is None:
                    return
                text = confirmed
            elif word == "/fork" and not await self._confirm_time_travel(word, rest):
                return
            self._help_asked = word == "/help"
            frame = {"type": "message", "sessionId": self.session_id, "content": text}
            if self.turn == "run":  # typed beside the run: it goes on; the answer shows
                self._commands_due += 1
                await self.send(frame)
                return
            self._set_turn("command")
            if not await self.send(frame):
                self._set_turn(None)
        else:
            await self._send_message(line, None)

    async def _send_message(self, text: str, busy: str | None) -> None:
        """An instruction: a run of its own now; or, typed while a run is in flight, what
        `busy` says (else the session's policy): kept in the session's queue (the `queue`
        frames list it), given to the run, or refused `busy` — the run goes on either way."""
        frame: dict[str, Any] = {"type": "message", "sessionId": self.session_id, "content": text}
        if busy is not None:
            frame["busy"] = busy
        if self.turn == "run":
            mid = "chat-" + secrets.token_hex(8)
            frame["messageId"] = mid  # a refusal names it: the run it was typed beside goes on
            self._busy_sent.add(mid)
            await self.send(frame)
            return
        self._set_turn("run")
        if not await self.send(frame):
            self._set_turn(None)

    async def _confirm_rollback(self, rest: str) -> str | None:
        """A rollback past outside effects first shows what it undoes and what it leaves
        done (the gateway's preview), and asks; a yes sends the confirmed command (`--confirm`,
        or `--accept-irreversible` when some stay done). None: not sent. Anything that stops
        the check (no terminal, flags already given, the API out of reach) sends the command
        as typed: the gateway then answers with the preview and does nothing."""
        args = rest.split()
        plain = f"/rollback {rest}".strip()
        if len(args) != 1 or not self.session_id or not self.input.interactive:
            return plain
        preview = await self._fetch_preview(self.session_id, args[0])
        if preview is None:
            return plain
        undo, stay = preview.get("compensable") or [], preview.get("irreversible") or []
        if not undo and not stay and not preview.get("pending"):
            return plain  # nothing outside: the tutorial's rollback, as it always was
        self._say(describe_preview(preview), "yellow")
        if preview.get("pending"):
            return plain  # the gateway says how to finish or abandon it
        if stay:
            question = (
                f"{len(stay)} outside effect(s) stay done"
                + (f"; {len(undo)} are undone first" if undo else "")
                + ". Roll back anyway? [y/N] "
            )
        else:
            question = f"Undo {len(undo)} outside effect(s) and roll back? [y/N] "
        try:
            answer = await self.input.read(question, answer=True)
        except (KeyboardInterrupt, PromptAbandoned):
            answer = None
        if (answer or "").strip().lower() not in YES:
            self._say("(no rollback: nothing was changed)", "dim")
            return None
        return f"/rollback {args[0]} " + ("--accept-irreversible" if stay else "--confirm")

    async def _fetch_preview(self, session_id: str, step: str) -> dict[str, Any] | None:
        """The gateway's rollback preview (GET …/rollback/{step}); None when it cannot be had
        (a bad step id: the gateway answers it in words)."""
        found = await self._api_get(f"/api/sessions/{session_id}/rollback/{quote(step, safe='')}")
        return found if isinstance(found, dict) and "compensable" in found else None

    async def _api_get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """A GET of the gateway's HTTP API; None when it cannot be had."""
        parts = urlsplit(self.opts.url)
        scheme = "https" if parts.scheme == "wss" else "http"
        base = urlunsplit((scheme, parts.netloc, "", "", ""))
        headers = {"Authorization": f"Bearer {self.opts.token}"} if self.opts.token else {}
        try:
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as http:
                r = await http.get(path, params=params)
            r.raise_for_status()
            return r.json()
        except (httpx.HTTPError, ValueError):
            return None

    async def _confirm_time_travel(self, word: str, rest: str) -> bool:
        """A fork copies none of the world: when the steps after the fork point hold effects
        outside the workspace (an MCP call, a Python tool), list them and ask first, as the
        page's dialog does. Anything that stops the check (no terminal, a bad step id, the
        API out of reach) leaves the decision to the gateway, which names them afterwards."""
        args = rest.split()
        if not args or not self.session_id or not self.input.interactive:
            return True
        try:
            seq = parse_step_ref(args[0], self.session_id)
        except XclawError:
            return True  # the gateway answers a bad step id in words
        steps = await self._fetch_steps(self.session_id)
        fork = word == "/fork"
        note = describe_outside(outside_marks_json(steps, seq + (1 if fork else 0)))
        if not note:
            return True
        where = "in this session after that step, " if fork else ""
        self._say(f"[{word[1:]}] {where}{note}", "yellow")
        question = "Fork anyway? [y/N] " if fork else "Roll back anyway? [y/N] "
        try:
            answer = await self.input.read(question, answer=True)
        except (KeyboardInterrupt, PromptAbandoned):
            answer = None
        if (answer or "").strip().lower() in YES:
            return True
        self._say(f"(no {word[1:]}: nothing was changed)", "dim")
        return False

    async def _fetch_steps(self, session_id: str) -> list[dict[str, Any]]:
        """Every step of the session from the HTTP API; [] when it cannot be had."""
        found = await self._api_get(f"/api/sessions/{session_id}/steps", {"n": 0})
        steps = found.get("steps") if isinstance(found, dict) else None
        return steps if isinstance(steps, list) else []

    def _interrupt(self) -> None:
        """Ctrl+C: the first cancels the run in flight (or warns at the prompt), the second
        quits."""
        self._interrupts += 1
        if self._interrupts >= 2:
            self._say("bye", "dim")
            self.quit(0)
            return
        if self.turn == "run" or self.approvals:
            self._say(
                "[cancel] stopping the run now… (Ctrl+C again to quit)",
                "yellow",
            )
            asyncio.get_running_loop().create_task(
                self.send({"type": "cancel", "sessionId": self.session_id})
            )
        else:
            self._say("(Ctrl+C again, /quit or Ctrl+D to quit)", "dim")

    async def _spin(self) -> None:
        while True:
            if self._prompting == "busy":
                self.input.redraw()  # the prompt draws the working line
            elif (
                not self.busy_input
                and self.turn == "run"
                and not self.approvals
                and not self.out.streaming
                and self._ws is not None
            ):
                self.spinner.draw()
            await asyncio.sleep(SPIN_INTERVAL_S)

    # --- main ---------------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._interrupt)
        conn = asyncio.create_task(self.connection_loop())
        reader = asyncio.create_task(self.input_loop())
        spin = asyncio.create_task(self._spin())
        try:
            await self._quit.wait()
        finally:
            spin.cancel()
            self.spinner.stop()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            for task in (reader, conn):
                task.cancel()
            ws = self._ws
            if ws is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 2)
            await asyncio.gather(reader, conn, return_exceptions=True)
            self.out.end_stream()
        return self.exit_code
